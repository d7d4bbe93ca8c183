package plugins_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins"
)

// unpacked holds the bundled plugins, SDKs and examples, unpacked once
// before any test runs: writing an executable while another test forks can
// make exec fail with ETXTBSY, so no test runs a file a test writes.
var unpacked string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plugins-unpacked-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	unpacked = dir
	if err := plugins.Unpack(dir); err != nil {
		fmt.Fprintln(os.Stderr, "unpack:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

func TestNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"echo", "http", "notify"}, plugins.Names())
	require.Equal(t, []string{"countdown", "countdown-sh"}, plugins.Examples())
}

// The SDKs and the examples are unpacked beside the bundled plugins, the
// examples' entrypoints executable; the bundled root loads neither (no
// manifest), and a root at examples/ loads the examples.
func TestUnpackTheSDKsAndExamples(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, plugins.Unpack(dir))
	for path, mode := range map[string]os.FileMode{
		"lib/ductile.py":                      0o644,
		"lib/ductile.sh":                      0o644,
		"examples/countdown/run.py":           0o755,
		"examples/countdown/manifest.yaml":    0o644,
		"examples/countdown-sh/run.sh":        0o755,
		"examples/countdown-sh/manifest.yaml": 0o644,
	} {
		fi, err := os.Stat(filepath.Join(dir, path))
		require.NoError(t, err, path)
		require.Equal(t, mode, fi.Mode(), path)
	}

	reg, errs := pluginhost.Discover([]string{dir}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	require.Equal(t, []string{"echo", "http", "notify"}, names(reg))
	// A built-in plugin's entrypoint runs this executable's builtin command.
	run, err := os.ReadFile(filepath.Join(dir, "http", "run"))
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	require.Contains(t, string(run), "exec '"+exe+"' builtin 'http'")
	reg, errs = pluginhost.Discover([]string{filepath.Join(dir, "examples")}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	require.Equal(t, []string{"countdown", "countdown-sh"}, names(reg))
}

func names(reg *pluginhost.Registry) []string {
	var out []string
	for _, p := range reg.List() {
		out = append(out, p.Name)
	}
	return out
}

func TestUnpackModes(t *testing.T) {
	t.Parallel()
	// Where a state directory does not exist yet, Unpack creates it
	// private, as the daemon does.
	state := filepath.Join(t.TempDir(), "state")
	dir := filepath.Join(state, "plugins")
	require.NoError(t, plugins.Unpack(dir))

	for path, mode := range map[string]os.FileMode{
		"..":                 0o700 | os.ModeDir,
		".":                  0o700 | os.ModeDir,
		"echo":               0o755 | os.ModeDir,
		"echo/run.sh":        0o755,
		"echo/manifest.yaml": 0o644,
	} {
		fi, err := os.Stat(filepath.Join(dir, path))
		require.NoError(t, err, path)
		require.Equal(t, mode, fi.Mode(), path)
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, "echo", ".unpack-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers)
}

func TestUnpackIsIdempotentAndRepairs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, plugins.Unpack(dir))
	runSh := filepath.Join(dir, "echo", "run.sh")
	manifest := filepath.Join(dir, "echo", "manifest.yaml")
	want, err := os.ReadFile(runSh)
	require.NoError(t, err)

	// Unchanged files are not rewritten.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(manifest, old, old))
	require.NoError(t, plugins.Unpack(dir))
	fi, err := os.Stat(manifest)
	require.NoError(t, err)
	require.True(t, fi.ModTime().Equal(old), "manifest rewritten although unchanged")

	// Changed content and lost modes are repaired.
	require.NoError(t, os.WriteFile(runSh, []byte("#!/bin/sh\necho tampered\n"), 0o755))
	require.NoError(t, os.Chmod(manifest, 0o600))
	require.NoError(t, plugins.Unpack(dir))
	got, err := os.ReadFile(runSh)
	require.NoError(t, err)
	require.Equal(t, want, got)
	fi, err = os.Stat(runSh)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode())
	fi, err = os.Stat(manifest)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode())
}
