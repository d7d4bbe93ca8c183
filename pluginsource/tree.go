package pluginsource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/pluginhost"
)

// ErrNoPlugin: the source (or the folder asked for in it) holds no plugin,
// or several and none was chosen.
var ErrNoPlugin = errors.New("no plugin chosen")

// pick finds the plugin folder in the tree at top: the folder sub (a
// relative path), else the folder whose directory or manifest is called
// name, else top itself. It returns the folder and its path in the tree
// ("" for top).
func pick(top, sub, name string) (dir, rel string, err error) {
	if sub != "" {
		clean := path.Clean(filepath.ToSlash(sub))
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return "", "", fmt.Errorf("--path %s must be a folder inside the source", sub)
		}
		if clean == "." {
			clean = ""
		}
		dir = filepath.Join(top, filepath.FromSlash(clean))
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return "", "", fmt.Errorf("%w: the source has no folder %s (its plugins: %s)", ErrNoPlugin, sub, listPlugins(top))
		}
		if realTop, _ := filepath.EvalSymlinks(top); !within(realTop, real) {
			return "", "", fmt.Errorf("--path %s leads outside the source (a symlink): give the folder it points to", sub)
		}
		if !exists(filepath.Join(dir, pluginhost.ManifestFile)) {
			return "", "", fmt.Errorf("%w: %s holds no %s (the source's plugins: %s)", ErrNoPlugin, sub, pluginhost.ManifestFile, listPlugins(top))
		}
		return dir, clean, nil
	}
	if name != "" {
		for _, c := range candidates(top) {
			if path.Base(c) == name || manifestName(filepath.Join(top, filepath.FromSlash(c))) == name {
				return filepath.Join(top, filepath.FromSlash(c)), c, nil
			}
		}
		return "", "", fmt.Errorf("%w: the source has no plugin %s (its plugins: %s)", ErrNoPlugin, name, listPlugins(top))
	}
	if exists(filepath.Join(top, pluginhost.ManifestFile)) {
		return top, "", nil
	}
	return "", "", fmt.Errorf("%w: the source holds several plugins, one folder each (%s): choose one with --path FOLDER (or --name NAME)", ErrNoPlugin, listPlugins(top))
}

// candidates are top itself ("") when it holds a manifest, and each
// immediate subfolder that does (as discovery looks at a root).
func candidates(top string) []string {
	var out []string
	if exists(filepath.Join(top, pluginhost.ManifestFile)) {
		out = append(out, "")
	}
	entries, _ := os.ReadDir(top)
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && exists(filepath.Join(top, e.Name(), pluginhost.ManifestFile)) {
			out = append(out, e.Name())
		}
	}
	return out
}

func listPlugins(top string) string {
	c := slices.DeleteFunc(candidates(top), func(s string) bool { return s == "" })
	if len(c) == 0 {
		return "none: no folder with a " + pluginhost.ManifestFile
	}
	return strings.Join(c, ", ")
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// copyTree copies the folder src to dst (which must not exist): folders
// 0755, files 0755 when src's has an execute bit and 0644 otherwise (never
// writable by others: discovery would refuse them), symlinks as they are
// (discovery decides on them). Git metadata (.git) and a record of an
// earlier install are left out.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && d.Name() == ".git" && rel != ".":
			return filepath.SkipDir
		case d.IsDir():
			return os.Mkdir(to, 0o755)
		case rel == RecordName || d.Name() == ".git":
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is neither a file, a folder nor a symlink: a plugin cannot hold it", p)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if fi.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		return copyFile(p, to, mode)
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil { // the umask may have narrowed it
		_ = out.Close()
		return err
	}
	return out.Close()
}

// manifestName is the name the manifest in dir gives, read leniently (a
// manifest with mistakes is still found by its name, to be refused with
// discovery's message), or "".
func manifestName(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, pluginhost.ManifestFile))
	if err != nil {
		return ""
	}
	var m struct {
		Name string `yaml:"name"`
	}
	_ = yaml.Unmarshal(data, &m)
	return m.Name
}
