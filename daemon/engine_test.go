package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

// TestEngineIsSwappedWholeByAReload: the daemon's Engine is the config it
// applied, with the record of it and its plugins and pipelines; a refused
// reload keeps it, an applied one replaces it whole and leaves the old one
// as it was for whoever still holds it.
func TestEngineIsSwappedWholeByAReload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := skipConfig(t, dir, "pipelines:\n  - name: fine\n    steps: [{uses: good}]\n")
	d, err := daemon.Open(ctx, daemon.Options{StateDir: filepath.Join(dir, "state"), Config: cfg, Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.NoError(t, err)
	defer d.Close()

	started := d.Engine()
	require.Same(t, cfg, started.Config())
	require.Same(t, d.Config(), started.Config())
	require.Same(t, d.Plugins(), started.Plugins())
	require.Same(t, d.Pipelines(), started.Pipelines())
	require.Same(t, started.Pipelines(), started.PipelineRuntime().Set)
	last, ok, err := daemon.LastApplied(ctx, d.Ledger)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, last.ConfigAppliedData, started.Applied())
	require.NoError(t, started.CannotRun("good", "handle"))

	// Refused (a plugin that did not load): the same Engine.
	_, err = d.Reload(ctx, false)
	require.Error(t, err)
	require.Same(t, started, d.Engine())

	root := filepath.Join(dir, "plugins")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "broken")))
	require.NoError(t, os.WriteFile(cfg.Source, []byte("plugin_roots: ["+root+"]\nplugins:\n  good: {enabled: false}\n"+
		"pipelines:\n  - name: other\n    steps: [{uses: good}]\n"), 0o600))
	reloaded, err := d.Reload(ctx, false)
	require.NoError(t, err)
	now := d.Engine()
	require.NotSame(t, started, now)
	require.Equal(t, reloaded, now.Applied())
	require.Same(t, d.Config(), now.Config())
	require.Contains(t, now.Pipelines().Pipelines, "other")
	require.ErrorContains(t, now.CannotRun("good", "handle"), "disabled")
	require.Contains(t, started.Pipelines().Pipelines, "fine", "the old Engine is unchanged")
	require.NoError(t, started.CannotRun("good", "handle"))
}
