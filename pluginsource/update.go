package pluginsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pluginhost"
)

// Find returns the plugin named name that plugin add installed in one of
// env.Roots (the first root holding it, as discovery would), with its
// record and files.
func Find(env Env, name string) (*Installed, error) {
	for _, r := range env.Roots {
		root, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		dir := filepath.Join(root, name)
		rec, err := ReadRecord(dir)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			continue
		}
		inst := &Installed{Name: name, Dir: dir, Root: root, Record: *rec}
		inst.Manifest, _ = pluginhost.LoadManifest(filepath.Join(dir, pluginhost.ManifestFile))
		if inst.Files, err = relativeFiles(dir); err != nil {
			return nil, err
		}
		return inst, nil
	}
	for _, p := range env.Loaded {
		if p.Name == name {
			return nil, fmt.Errorf("%w: plugin %s (%s) was not installed with ductile plugin add, so it has no source to update from: manage its directory yourself",
				ErrNotInstalled, name, p.Dir)
		}
	}
	return nil, fmt.Errorf("%w: no plugin %s in the plugin roots (ductile plugin list shows the plugins and their sources)", ErrNotInstalled, name)
}

// Update is what plugin update found, and did unless it was a dry run.
type Update struct {
	Old, New *Installed
	Diff     Diff
}

// UpdatePlugin fetches the source of the plugin name was installed from,
// at ref ("" keeps the recorded ref: a branch moves to its newest commit),
// validates it as discovery does, and (unless dryRun) replaces the
// plugin's files and pins them.
func UpdatePlugin(ctx context.Context, env Env, name, ref string, dryRun bool) (*Update, error) {
	old, err := Find(env, name)
	if err != nil {
		return nil, err
	}
	src := Source{Location: old.Record.Source, Kind: old.Record.Kind, Ref: old.Record.Ref}
	if ref != "" {
		src.Ref = ref
	}
	f, err := fetch(ctx, src)
	if err != nil {
		return nil, err
	}
	defer f.remove()
	dir, rel, err := pick(f.dir, old.Record.Path, "")
	if err != nil {
		return nil, fmt.Errorf("the source at %s: %w", src, err)
	}
	rec := Record{Source: src.Location, Kind: src.Kind, Ref: src.Ref, Commit: f.commit, Path: rel, InstalledAt: env.now()}
	st, err := stage(old.Root, env, dir, name, rec)
	if err != nil {
		return nil, err
	}
	defer st.remove()
	inst := st.inst
	inst.Dir = old.Dir
	if inst.Name != name {
		return nil, fmt.Errorf("the source now names the plugin %s, not %s: remove %s and add %s", inst.Name, name, name, inst.Name)
	}
	u := &Update{Old: old, New: &inst, Diff: diff(old, &inst)}
	if dryRun {
		return u, nil
	}
	unlock, err := lockRoot(old.Root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := swap(old.Root, old.Dir, st.dir); err != nil {
		return nil, fmt.Errorf("update %s: %w", name, err)
	}
	if err := pin(old.Root, name, inst.Files); err != nil {
		return nil, fmt.Errorf("update %s: the new files are in place but %w: discovery refuses the plugin until it is pinned; run ductile plugin update %s again", name, err, name)
	}
	return u, nil
}

// swap replaces the directory dir by staged: dir is moved aside into a
// staging directory of root, staged renamed into its place (moved back on
// failure), then the old files removed.
func swap(root, dir, staged string) error {
	aside, err := os.MkdirTemp(root, ".ductile-old-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(aside)
	old := filepath.Join(aside, filepath.Base(dir))
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(staged, dir); err != nil {
		if back := os.Rename(old, dir); back != nil {
			return fmt.Errorf("%w (and the old files could not be moved back from %s: %v)", err, old, back)
		}
		return err
	}
	return nil
}

// Remove takes away the plugin name that plugin add installed: its
// directory and its lines in .checksums (unless dryRun).
func Remove(env Env, name string, dryRun bool) (*Installed, error) {
	inst, err := Find(env, name)
	if err != nil || dryRun {
		return inst, err
	}
	unlock, err := lockRoot(inst.Root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	aside, err := os.MkdirTemp(inst.Root, ".ductile-old-")
	if err != nil {
		return nil, fmt.Errorf("remove %s: %w", name, err)
	}
	defer os.RemoveAll(aside)
	if err := os.Rename(inst.Dir, filepath.Join(aside, name)); err != nil {
		return nil, fmt.Errorf("remove %s: %w", name, err)
	}
	if err := pin(inst.Root, name, nil); err != nil {
		return nil, fmt.Errorf("remove %s: the files are gone but %w", name, err)
	}
	return inst, nil
}

// Diff is how an update changes a plugin: what its manifest declares and
// which of its files change.
type Diff struct {
	OldVersion, NewVersion   string
	OldCommit, NewCommit     string
	OldRef, NewRef           string
	OldEntrypoint, NewEntry  string
	CommandsAdded            []pluginhost.CommandSpec
	CommandsRemoved          []pluginhost.CommandSpec
	CommandsRetyped          []Retyped
	RequiredAdded            []string
	RequiredRemoved          []string
	OptionalAdded            []string
	OptionalRemoved          []string
	FilesAdded, FilesRemoved []string
	FilesChanged             []string
}

// Retyped is a command whose type changes.
type Retyped struct {
	Name     string
	Old, New pluginhost.CommandType
}

// Empty reports whether nothing changes but, at most, the install time.
func (d Diff) Empty() bool {
	return d.OldVersion == d.NewVersion && d.OldCommit == d.NewCommit && d.OldEntrypoint == d.NewEntry &&
		len(d.CommandsAdded)+len(d.CommandsRemoved)+len(d.CommandsRetyped)+len(d.RequiredAdded)+len(d.RequiredRemoved)+
			len(d.OptionalAdded)+len(d.OptionalRemoved)+len(d.FilesAdded)+len(d.FilesRemoved)+len(d.FilesChanged) == 0
}

func diff(old, new *Installed) Diff {
	d := Diff{OldCommit: old.Record.Commit, NewCommit: new.Record.Commit, OldRef: old.Record.Ref, NewRef: new.Record.Ref}
	om, nm := old.Manifest, new.Manifest
	if om == nil {
		om = &pluginhost.Manifest{}
	}
	d.OldVersion, d.NewVersion = om.Version, nm.Version
	d.OldEntrypoint, d.NewEntry = om.Entrypoint, nm.Entrypoint
	for _, c := range nm.Commands {
		oc, ok := om.Command(c.Name)
		switch {
		case !ok:
			d.CommandsAdded = append(d.CommandsAdded, c)
		case oc.Type != c.Type:
			d.CommandsRetyped = append(d.CommandsRetyped, Retyped{Name: c.Name, Old: oc.Type, New: c.Type})
		}
	}
	for _, c := range om.Commands {
		if _, ok := nm.Command(c.Name); !ok {
			d.CommandsRemoved = append(d.CommandsRemoved, c)
		}
	}
	d.RequiredAdded, d.RequiredRemoved = setDiff(om.ConfigKeys.Required, nm.ConfigKeys.Required)
	d.OptionalAdded, d.OptionalRemoved = setDiff(om.ConfigKeys.Optional, nm.ConfigKeys.Optional)
	d.FilesAdded, d.FilesRemoved, d.FilesChanged = fileDiff(old.Files, new.Files)
	return d
}

// setDiff returns what b adds to a and what it drops.
func setDiff(a, b []string) (added, removed []string) {
	for _, k := range b {
		if !slices.Contains(a, k) {
			added = append(added, k)
		}
	}
	for _, k := range a {
		if !slices.Contains(b, k) {
			removed = append(removed, k)
		}
	}
	return added, removed
}

// fileDiff compares two file lists (the install record left out: it always
// changes).
func fileDiff(old, new []config.FileHash) (added, removed, changed []string) {
	oldSums := map[string]string{}
	for _, f := range old {
		oldSums[f.Path] = f.BLAKE3
	}
	for _, f := range new {
		if f.Path == RecordName {
			continue
		}
		sum, ok := oldSums[f.Path]
		switch {
		case !ok:
			added = append(added, f.Path)
		case sum != f.BLAKE3:
			changed = append(changed, f.Path)
		}
		delete(oldSums, f.Path)
	}
	for p := range oldSums {
		if p != RecordName {
			removed = append(removed, p)
		}
	}
	slices.Sort(removed)
	return added, removed, changed
}
