package pluginsource_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/pluginsource"
)

func writePlugin(t *testing.T, dir, version, commands string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + filepath.Base(dir) + "\nversion: " + version +
		"\nprotocol: 2\nentrypoint: run.sh\ncommands: " + commands + "\nconfig_keys: {required: [api_key]}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho "+version+"\n"), 0o755))
}

// TestAddUpdateRemoveFromAFolder: a folder source is copied and its files
// pinned (no commit); a dry run writes nothing; a plugin missing required
// config is added with discovery's message as a note, and shadows a
// plugin of the same name in a later root; an update shows the changes;
// remove takes the directory and its pins away, and discovery then loads
// the shadowed one again.
func TestAddUpdateRemoveFromAFolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "weather")
	writePlugin(t, src, "1.0.0", "[poll]")
	root, later := t.TempDir(), t.TempDir()
	writePlugin(t, filepath.Join(later, "weather"), "0.0.1", "[poll]")
	roots := []string{root, later}
	env := func() pluginsource.Env {
		reg, _ := pluginhost.Discover(roots, pluginhost.DiscoverOptions{ConfigElsewhere: true})
		return pluginsource.Env{Root: root, Roots: roots, Loaded: reg.List(),
			Now: func() time.Time { return time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC) }}
	}
	source, err := pluginsource.ParseSource(src)
	require.NoError(t, err)

	inst, err := pluginsource.Add(ctx, env(), pluginsource.AddRequest{Source: source, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "weather"), inst.Dir)
	require.NoDirExists(t, inst.Dir)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, entries, "a dry run leaves nothing behind")

	inst, err = pluginsource.Add(ctx, env(), pluginsource.AddRequest{Source: source})
	require.NoError(t, err)
	require.Equal(t, pluginsource.KindFolder, inst.Record.Kind)
	require.Empty(t, inst.Record.Commit)
	require.ErrorIs(t, inst.MissingConfig, pluginhost.ErrMissingConfig)
	require.ErrorContains(t, inst.MissingConfig, "missing required config key(s): api_key")
	require.Equal(t, []string{filepath.Join(later, "weather")}, inst.Overrides)
	listed, err := config.ReadChecksums(filepath.Join(root, pluginhost.RootChecksumsName), root)
	require.NoError(t, err)
	require.Len(t, listed, 3)
	reg, errs := pluginhost.Discover(roots, pluginhost.DiscoverOptions{ConfigElsewhere: true})
	p, ok := reg.Get("weather")
	require.True(t, ok, "%v", errs)
	require.Equal(t, "1.0.0", p.Manifest.Version)

	_, err = pluginsource.Add(ctx, env(), pluginsource.AddRequest{Source: source})
	require.ErrorIs(t, err, pluginsource.ErrExists)

	writePlugin(t, src, "1.1.0", "[poll, handle]")
	u, err := pluginsource.UpdatePlugin(ctx, env(), "weather", "", false)
	require.NoError(t, err)
	require.Equal(t, "1.0.0", u.Diff.OldVersion)
	require.Equal(t, "1.1.0", u.Diff.NewVersion)
	require.Len(t, u.Diff.CommandsAdded, 1)
	require.Equal(t, []string{"manifest.yaml", "run.sh"}, u.Diff.FilesChanged)
	require.False(t, u.Diff.Empty())
	u, err = pluginsource.UpdatePlugin(ctx, env(), "weather", "", true)
	require.NoError(t, err)
	require.True(t, u.Diff.Empty(), "%+v", u.Diff)

	_, err = pluginsource.Remove(env(), "weather", false)
	require.NoError(t, err)
	require.NoDirExists(t, filepath.Join(root, "weather"))
	listed, err = config.ReadChecksums(filepath.Join(root, pluginhost.RootChecksumsName), root)
	require.NoError(t, err)
	require.Empty(t, listed)
	reg, _ = pluginhost.Discover(roots, pluginhost.DiscoverOptions{ConfigElsewhere: true})
	p, _ = reg.Get("weather")
	require.Equal(t, "0.0.1", p.Manifest.Version, "the later root's plugin loads again")

	_, err = pluginsource.Remove(env(), "weather", false)
	require.ErrorIs(t, err, pluginsource.ErrNotInstalled)
}
