package pluginhost_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pluginhost"
)

// TestDiscoverRefusesPluginsWhoseFilesDifferFromTheRootsChecksums: a
// plugin the root's .checksums pins loads only while its files are exactly
// those pinned; a plugin it does not list loads as always.
func TestDiscoverRefusesPluginsWhoseFilesDifferFromTheRootsChecksums(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, name := range []string{"pinned", "loose"} {
		dir := filepath.Join(root, name)
		require.NoError(t, os.Mkdir(dir, 0o755))
		manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + name + "\nversion: 1\nprotocol: 2\nentrypoint: run.sh\ncommands: [poll]\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	}
	files, err := pluginhost.PluginFiles(filepath.Join(root, "pinned"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	sums := filepath.Join(root, pluginhost.RootChecksumsName)
	require.NoError(t, config.WriteChecksums(sums, root, files))

	load := func() (*pluginhost.Registry, []error) {
		return pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	}
	reg, errs := load()
	require.Empty(t, errs)
	require.Len(t, reg.List(), 2)

	for _, tc := range []struct {
		name    string
		tamper  func(dir string)
		restore func(dir string)
		want    string
	}{
		{"changed", func(dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\nevil\n"), 0o755))
		},
			func(dir string) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
			},
			"run.sh (changed)"},
		{"added", func(dir string) { require.NoError(t, os.WriteFile(filepath.Join(dir, "lib.sh"), nil, 0o644)) },
			func(dir string) { require.NoError(t, os.Remove(filepath.Join(dir, "lib.sh"))) },
			"lib.sh (not listed)"},
	} {
		dir := filepath.Join(root, "pinned")
		tc.tamper(dir)
		reg, errs = load()
		require.Len(t, errs, 1, tc.name)
		require.ErrorIs(t, errs[0], pluginhost.ErrTampered, tc.name)
		require.ErrorIs(t, errs[0], pluginhost.ErrUntrusted, tc.name)
		require.ErrorContains(t, errs[0], tc.want, tc.name)
		_, ok := reg.Get("pinned")
		require.False(t, ok, tc.name)
		_, ok = reg.Get("loose")
		require.True(t, ok, "an unpinned plugin loads as always")
		tc.restore(dir)
		_, errs = load()
		require.Empty(t, errs, tc.name)
	}

	require.NoError(t, os.Chmod(sums, 0o666))
	_, errs = load()
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "world-writable")
}

func TestDiscoverRefusesARootWhoseChecksumsCannotBeRead(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, pluginhost.RootChecksumsName), []byte("not a checksum line\n"), 0o600))
	_, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "not in b3sum's format")
	require.NotContains(t, errs[0].Error(), "config lock")
}
