package plugins_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/plugins"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"echo"}, plugins.Names())
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
