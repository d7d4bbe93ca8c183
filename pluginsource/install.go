package pluginsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pluginhost"
)

// Errors an install returns (wrapped, with what to do next).
var (
	// ErrExists: a plugin of that name is already installed where it
	// would go, or in an earlier root that would shadow it.
	ErrExists = errors.New("plugin already installed")
	// ErrNotInstalled: no plugin of that name was installed by plugin add.
	ErrNotInstalled = errors.New("plugin not installed by plugin add")
)

// RefusedError is a plugin discovery would not load, with discovery's own
// error (its Dir named where the plugin would be installed).
type RefusedError struct {
	Err *pluginhost.PluginError
}

func (e *RefusedError) Error() string {
	return e.Err.Error() + ": discovery would skip it, so it was not added"
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Env is where plugins are installed and how discovery will see them.
type Env struct {
	// Root is the plugin root to install into (one of Roots).
	Root string
	// Roots are the configured plugin roots, in discovery's order (the
	// bundled root, always last, not among them).
	Roots []string
	// Options are discovery's options (the operator's plugin config, the
	// symlink rule).
	Options pluginhost.DiscoverOptions
	// Loaded are the plugins discovery finds now (bundled ones included),
	// to tell a name clash: see Installed.Overrides.
	Loaded []*pluginhost.Plugin
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Installed is a plugin as installed, or as it would be.
type Installed struct {
	Name     string
	Dir      string // <root>/<name>
	Root     string
	Manifest *pluginhost.Manifest
	Record   Record
	// Files are the plugin's files with their hashes, paths relative to Dir.
	Files []config.FileHash
	// MissingConfig is discovery's error when a config_keys.required key
	// is not set: the plugin is installed, and skipped until it is.
	MissingConfig error
	// Overrides are the directories of plugins of the same name that it
	// shadows from now on (later roots, or the bundled one).
	Overrides []string
}

// AddRequest says what plugin add installs.
type AddRequest struct {
	Source Source
	Path   string // the plugin's folder in the source
	Name   string // or the plugin chosen by name
	DryRun bool
}

// Add fetches the plugin req names, validates it as discovery does, and
// (unless DryRun) installs it as <root>/<name> and pins its files in the
// root's .checksums.
func Add(ctx context.Context, env Env, req AddRequest) (*Installed, error) {
	root, err := prepareRoot(env.Root, req.DryRun)
	if err != nil {
		return nil, err
	}
	f, err := fetch(ctx, req.Source)
	if err != nil {
		return nil, err
	}
	defer f.remove()
	dir, rel, err := pick(f.dir, req.Path, req.Name)
	if err != nil {
		return nil, err
	}
	rec := Record{Source: req.Source.Location, Kind: req.Source.Kind, Ref: req.Source.Ref, Commit: f.commit, Path: rel, InstalledAt: env.now()}
	st, err := stage(root, env, dir, baseName(req.Source, rel), rec)
	if err != nil {
		return nil, err
	}
	defer st.remove()
	if req.Name != "" && st.inst.Name != req.Name {
		return nil, fmt.Errorf("%w: the folder %s holds plugin %s, not %s", ErrNoPlugin, rel, st.inst.Name, req.Name)
	}
	inst := st.inst
	if err := env.clash(&inst); err != nil {
		return nil, err
	}
	if req.DryRun {
		return &inst, nil
	}
	unlock, err := lockRoot(root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := env.clash(&inst); err != nil { // again, under the lock
		return nil, err
	}
	if err := os.Rename(st.dir, inst.Dir); err != nil {
		return nil, fmt.Errorf("install %s: %w", inst.Name, err)
	}
	if err := pin(root, inst.Name, inst.Files); err != nil {
		return nil, fmt.Errorf("install %s: the files are in %s but %w: run ductile plugin remove %s and add it again", inst.Name, inst.Dir, err, inst.Name)
	}
	return &inst, nil
}

// prepareRoot resolves root (creating it, 0755, unless dryRun).
func prepareRoot(root string, dryRun bool) (string, error) {
	if root == "" {
		return "", errors.New("no plugin root to install into: add plugin_roots: [./plugins] to the config (plugin add installs into the first), or give --root DIR")
	}
	if !dryRun {
		if err := os.MkdirAll(root, 0o755); err != nil {
			return "", fmt.Errorf("plugin root: %w", err)
		}
		sweepLeftovers(root, time.Now().Add(-staleAfter))
	} else if !exists(root) {
		// Nothing may be written: stage beside it in a temporary directory.
		return filepath.Abs(root)
	}
	return filepath.EvalSymlinks(root)
}

// baseName is the folder name a plugin is staged under (what discovery
// names a plugin whose manifest cannot be read): its folder's, else the
// source's last path element without .git.
func baseName(src Source, rel string) string {
	if rel != "" {
		return filepath.Base(filepath.FromSlash(rel))
	}
	b := strings.TrimSuffix(filepath.Base(strings.TrimRight(src.Location, "/")), ".git")
	if i := strings.LastIndexAny(b, ":"); i >= 0 {
		b = b[i+1:]
	}
	if b == "" || b == "." {
		b = "plugin"
	}
	return b
}

// staged is a plugin copied into a staging directory of its root and
// validated there.
type staged struct {
	dir  string // the plugin's staged directory
	inst Installed
	rm   string // the staging directory (a dot-name discovery skips)
}

func (s *staged) remove() { _ = os.RemoveAll(s.rm) }

// stage copies dir into a staging directory in root as base, writes rec,
// and validates it with discovery's code: a plugin it would skip is a
// *RefusedError (a missing required config key only sets MissingConfig).
func stage(root string, env Env, dir, base string, rec Record) (*staged, error) {
	parent := root
	if !exists(root) {
		parent = "" // a dry run with no root yet
	}
	tmp, err := os.MkdirTemp(parent, ".ductile-stage-")
	if err != nil {
		return nil, fmt.Errorf("stage plugin: %w", err)
	}
	st := &staged{dir: filepath.Join(tmp, base), rm: tmp}
	fail := func(err error) (*staged, error) { st.remove(); return nil, err }
	if err := copyTree(dir, st.dir); err != nil {
		return fail(fmt.Errorf("copy plugin: %w", err))
	}
	if err := writeRecord(st.dir, rec); err != nil {
		return fail(fmt.Errorf("stage plugin: %w", err))
	}
	roots := append(append([]string{}, env.Roots...), root)
	opts := env.Options
	opts.ConfigElsewhere = true
	p, err := pluginhost.LoadDir(st.dir, roots, opts)
	var pe *pluginhost.PluginError
	if errors.As(err, &pe) {
		pe.Dir = renamed(pe.Dir, st.dir, filepath.Join(root, base))
		return fail(&RefusedError{Err: pe})
	} else if err != nil {
		return fail(err)
	}
	if p == nil {
		return fail(fmt.Errorf("%w: %s holds no %s", ErrNoPlugin, dir, pluginhost.ManifestFile))
	}
	inst := Installed{Name: p.Name, Root: root, Dir: filepath.Join(root, p.Name), Manifest: p.Manifest, Record: rec}
	opts.ConfigElsewhere = false
	if _, err := pluginhost.LoadDir(st.dir, roots, opts); errors.Is(err, pluginhost.ErrMissingConfig) && errors.As(err, &pe) {
		pe.Dir = inst.Dir
		inst.MissingConfig = pe
	}
	if inst.Files, err = relativeFiles(st.dir); err != nil {
		return fail(err)
	}
	st.inst = inst
	return st, nil
}

// renamed replaces the prefix from of p by to.
func renamed(p, from, to string) string {
	if rel, err := filepath.Rel(from, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join(to, rel)
	}
	return p
}

// relativeFiles is pluginhost.PluginFiles with paths relative to dir.
func relativeFiles(dir string) ([]config.FileHash, error) {
	files, err := pluginhost.PluginFiles(dir)
	if err != nil {
		return nil, err
	}
	for i := range files {
		rel, _ := filepath.Rel(dir, files[i].Path)
		files[i].Path = filepath.ToSlash(rel)
	}
	return files, nil
}

// clash checks inst's name against the plugins loaded now: one in an
// earlier root would shadow it, one in the same root is the same plugin
// (update it), one later is shadowed by it (inst.Overrides). The same rules
// hold for a directory of that name in the root.
func (env Env) clash(inst *Installed) error {
	if exists(inst.Dir) {
		return fmt.Errorf("%w: %s already exists: ductile plugin update %s moves an added plugin to another commit; ductile plugin remove %s takes it away",
			ErrExists, inst.Dir, inst.Name, inst.Name)
	}
	target := env.rootIndex(inst.Root)
	inst.Overrides = nil
	for _, p := range env.Loaded {
		if p.Name != inst.Name {
			continue
		}
		switch i := env.rootIndex(p.Dir); {
		case i < target:
			return fmt.Errorf("%w: plugin %s loads from %s, which comes first (the first root wins), so this one would be shadowed: update or remove that one, or install into its root with --root",
				ErrExists, p.Name, p.Dir)
		case i == target:
			return fmt.Errorf("%w: plugin %s is already in this root, as %s: remove it first, or update it", ErrExists, p.Name, p.Dir)
		default:
			inst.Overrides = append(inst.Overrides, p.Dir)
		}
	}
	return nil
}

// rootIndex is the index in env.Roots of the root holding p (len(Roots)
// for one outside them all: the bundled root).
func (env Env) rootIndex(p string) int {
	for i, r := range env.Roots {
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			real = r
		}
		if real == p || within(real, p) {
			return i
		}
	}
	return len(env.Roots)
}

func (env Env) now() string {
	now := time.Now
	if env.Now != nil {
		now = env.Now
	}
	return now().UTC().Format(time.RFC3339)
}

// pin sets the entries of the plugin directory entry in root's .checksums
// to files (paths relative to the plugin directory; none: remove them),
// keeping every other line. The file is written atomically, mode 0600.
func pin(root, entry string, files []config.FileHash) error {
	path := filepath.Join(root, pluginhost.RootChecksumsName)
	listed, err := config.ReadChecksums(path, root)
	if err != nil {
		return fmt.Errorf("pin %s: %w", entry, err)
	}
	prefix := filepath.Join(root, entry) + string(filepath.Separator)
	kept := listed[:0]
	for _, f := range listed {
		if !strings.HasPrefix(f.Path, prefix) {
			kept = append(kept, f)
		}
	}
	for _, f := range files {
		kept = append(kept, config.FileHash{Path: filepath.Join(root, entry, filepath.FromSlash(f.Path)), BLAKE3: f.BLAKE3})
	}
	if err := config.WriteChecksums(path, root, kept); err != nil {
		return fmt.Errorf("pin %s: %w", entry, err)
	}
	return nil
}

// staleAfter is the age past which a staging directory is a leftover of an
// add, update or remove that was killed midway.
const staleAfter = time.Hour

// sweepLeftovers removes the staging directories in root (discovery skips
// them) last changed before cutoff.
func sweepLeftovers(root string, cutoff time.Time) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), ".ductile-stage-") && !strings.HasPrefix(e.Name(), ".ductile-old-") {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
