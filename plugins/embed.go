// Package plugins holds the plugins bundled with Ductile and writes them to
// disk so discovery can load them like any other plugin.
//
// Each bundled plugin is a directory here (manifest.yaml plus its
// entrypoint). To bundle another one, add its directory to the go:embed line
// below. The plugins built into the executable (package builtin: http,
// notify) are bundled too: Unpack writes each one's manifest and an
// entrypoint script that runs this executable as "ductile builtin NAME". Beside them, lib/ holds the SDKs (ductile.py, ductile.sh) and
// examples/ plugins that show them: neither is a plugin directory, so the
// bundled root loads neither; a config adds examples/ to plugin_roots to
// load the examples, which find the SDKs at ../../lib.
package plugins

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins/builtin"
)

//go:embed echo examples lib
var bundled embed.FS

// Names returns the names of the bundled plugins (the plugin directories
// here and the built-in plugins), sorted.
func Names() []string {
	names := append(pluginDirs("."), builtin.Names()...)
	slices.Sort(names)
	return names
}

// Examples returns the names of the example plugin directories (under
// examples/), sorted.
func Examples() []string { return pluginDirs("examples") }

// pluginDirs are the directories in dir that hold a manifest.
func pluginDirs(dir string) []string {
	entries, _ := fs.ReadDir(bundled, dir) // embedded: it exists
	var names []string
	for _, e := range entries {
		if _, err := fs.Stat(bundled, path.Join(dir, e.Name(), pluginhost.ManifestFile)); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// Unpack writes every bundled plugin into dir (created if needed, with its
// missing parents, mode 0700: it is usually inside a state directory) as
// dir/<plugin>/…, and the SDKs and examples as dir/lib/… and
// dir/examples/<plugin>/…. Each plugin's entrypoint (from its manifest) gets
// mode 0755, every other file 0644, directories 0755; go:embed does not keep
// file modes, so the manifest is what marks the executable. Unpack is idempotent:
// a file whose content and mode already match is left alone, any other is
// replaced atomically (write to a temporary file, then rename), so a plugin
// that is running while Unpack runs is never seen half-written.
func Unpack(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("unpack plugins: %w", err)
	}
	trees := pluginDirs(".")
	for _, name := range Examples() {
		trees = append(trees, path.Join("examples", name))
	}
	for _, name := range trees {
		if err := unpackOne(dir, name); err != nil {
			return fmt.Errorf("unpack plugin %s: %w", name, err)
		}
	}
	if err := unpackTree(dir, "lib", ""); err != nil {
		return fmt.Errorf("unpack plugins/lib: %w", err)
	}
	return unpackBuiltins(dir)
}

// unpackBuiltins writes each built-in plugin's manifest and entrypoint
// script, which names this executable (symlinks resolved): a new binary
// rewrites them at its first start.
func unpackBuiltins(dir string) error {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fmt.Errorf("unpack built-in plugins: find this executable: %w", err)
	}
	for _, name := range builtin.Names() {
		manifest, err := builtin.Manifest(name)
		if err != nil {
			return err
		}
		pdir := filepath.Join(dir, name)
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return fmt.Errorf("unpack plugin %s: %w", name, err)
		}
		if err := writeIfChanged(filepath.Join(pdir, pluginhost.ManifestFile), manifest, 0o644); err != nil {
			return fmt.Errorf("unpack plugin %s: %w", name, err)
		}
		if err := writeIfChanged(filepath.Join(pdir, builtin.EntrypointFile), builtin.Entrypoint(exe, name), 0o755); err != nil {
			return fmt.Errorf("unpack plugin %s: %w", name, err)
		}
	}
	return nil
}

func unpackOne(dir, name string) error {
	raw, err := bundled.ReadFile(path.Join(name, pluginhost.ManifestFile))
	if err != nil {
		return err
	}
	m, err := pluginhost.ParseManifest(raw)
	if err != nil {
		return err // "invalid manifest: …"
	}
	return unpackTree(dir, name, path.Join(name, path.Clean(m.Entrypoint)))
}

// unpackTree writes the embedded tree at name into dir, entrypoint (if
// any) executable.
func unpackTree(dir, name, entrypoint string) error {
	return fs.WalkDir(bundled, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			return os.Chmod(dst, 0o755)
		}
		mode := fs.FileMode(0o644)
		if p == entrypoint {
			mode = 0o755
		}
		data, err := bundled.ReadFile(p)
		if err != nil {
			return err
		}
		return writeIfChanged(dst, data, mode)
	})
}

func writeIfChanged(dst string, data []byte, mode fs.FileMode) error {
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		fi, err := os.Stat(dst)
		if err != nil {
			return err
		}
		if fi.Mode().Perm() == mode {
			return nil
		}
		return os.Chmod(dst, mode)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".unpack-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
