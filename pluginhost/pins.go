package pluginhost

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ductile/ductile/config"
)

// RootChecksumsName is the file in a plugin root that pins the files of the
// plugins ductile plugin add installed there: one "<blake3 hex>  <dir>/<file>"
// line per file, paths relative to the root, as b3sum writes them (so
// b3sum --check .checksums, run in the root, verifies them too). Discovery
// refuses a plugin listed there whose files differ from it (ErrUntrusted):
// a file changed, missing or not listed. A plugin it does not list loads as
// it always has.
const RootChecksumsName = ".checksums"

// ErrTampered is matched (errors.Is) with ErrUntrusted by the error of a
// plugin whose files differ from its root's .checksums.
var ErrTampered = errors.New("plugin files differ from .checksums")

// PluginFiles hashes every file under dir, the way discovery checks them
// against RootChecksumsName: each regular file by its content (BLAKE3, as
// config.HashBytes), each symlink by its target's text ("symlink:" + target),
// paths absolute under dir, sorted. A file of any other kind (a socket, a
// device) is an error.
func PluginFiles(dir string) ([]config.FileHash, error) {
	var out []config.FileHash
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, config.FileHash{Path: p, BLAKE3: config.HashBytes([]byte("symlink:" + target))})
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is neither a regular file, a directory nor a symlink", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, config.FileHash{Path: p, BLAKE3: config.HashBytes(data)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hash plugin files: %w", err)
	}
	slices.SortFunc(out, func(a, b config.FileHash) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// rootPins is a plugin root's .checksums as read, by plugin directory
// (the root's entry name): file path relative to that directory → hash.
type rootPins map[string]map[string]string

// readRootPins reads root's .checksums. No file gives nil, nil. A file
// others may write is refused: whoever can write it can pin their own files.
func readRootPins(root string) (rootPins, error) {
	path := filepath.Join(root, RootChecksumsName)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, kindErrorf(ErrUntrusted, "%s is not a regular file", path)
	}
	if worldWritable(fi) {
		return nil, kindErrorf(ErrUntrusted, "%s is world-writable (mode %v): chmod o-w %s", path, fi.Mode().Perm(), path)
	}
	listed, err := config.ReadChecksums(path, root)
	if err != nil {
		// Its own message names config lock, which writes a config's
		// .checksums, not this one.
		return nil, fmt.Errorf("%s is not in b3sum's format (\"<blake3 hex>  <dir>/<file>\" lines), so none of the root's plugins is trusted: restore it, or remove it and add the plugins again with ductile plugin add", path)
	}
	pins := rootPins{}
	for _, f := range listed {
		rel, err := filepath.Rel(root, f.Path)
		entry, file, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if err != nil || !ok || entry == ".." || file == "" {
			return nil, fmt.Errorf("%s lists %s, which is not inside a plugin directory of %s: remove the line", path, f.Path, root)
		}
		if pins[entry] == nil {
			pins[entry] = map[string]string{}
		}
		pins[entry][file] = f.BLAKE3
	}
	return pins, nil
}

// check compares the files of the plugin directory dir (the root's entry
// entry, resolved) with what .checksums pins for entry; nothing pinned is
// no problem.
func (pins rootPins) check(entry, dir string) error {
	want, ok := pins[entry]
	if !ok {
		return nil
	}
	files, err := PluginFiles(dir)
	if err != nil {
		return err
	}
	var problems []string
	seen := map[string]bool{}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f.Path)
		rel = filepath.ToSlash(rel)
		seen[rel] = true
		switch sum, listed := want[rel]; {
		case !listed:
			problems = append(problems, rel+" (not listed)")
		case sum != f.BLAKE3:
			problems = append(problems, rel+" (changed)")
		}
	}
	for rel := range want {
		if !seen[rel] {
			problems = append(problems, rel+" (missing)")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return &kindError{kind: tamperedKind{}, msg: fmt.Sprintf(
		"files differ from those ductile plugin add pinned in %s: %s: if the change is yours, run ductile plugin update %s (or add it again); if not, restore the files",
		RootChecksumsName, strings.Join(problems, ", "), entry)}
}

// tamperedKind matches both ErrUntrusted and ErrTampered.
type tamperedKind struct{}

func (tamperedKind) Error() string { return ErrTampered.Error() }
func (tamperedKind) Is(target error) bool {
	return target == ErrTampered || target == ErrUntrusted
}

// LoadDir validates the plugin directory dir exactly as Discover validates
// an entry of one of roots (the trust rules, the manifest, required config
// against opts.Config), without reading any .checksums: for ductile plugin
// add, before the plugin is pinned. It returns nil, nil when dir holds no
// manifest.yaml. Errors are *PluginError, as Discover's.
func LoadDir(dir string, roots []string, opts DiscoverOptions) (*Plugin, error) {
	d := discoverer{opts: opts, log: opts.Logger}
	if d.log == nil {
		d.log = noLogger()
	}
	for _, r := range roots {
		if real, err := resolveRoot(r); err == nil {
			d.approved = append(d.approved, real)
		}
	}
	return d.load(dir)
}
