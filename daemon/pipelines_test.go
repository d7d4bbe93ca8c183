package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// skipConfig writes a config of plugin good (handle), loaded, and broken,
// whose manifest does not load, with the pipelines given, and loads it.
func skipConfig(t *testing.T, dir, pipelines string) *config.Config {
	t.Helper()
	root := filepath.Join(dir, "plugins")
	writeLifecyclePlugin(t, root, "good", "{name: handle, type: write}")
	broken := filepath.Join(root, "broken")
	require.NoError(t, os.MkdirAll(broken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nname: broken\n"), 0o644))
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("plugin_roots: ["+root+"]\nplugins:\n  good: {}\n  broken: {}\n"+pipelines), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	return cfg
}

const skipPipelines = `pipelines:
  - name: fine
    steps: [{uses: good}]
  - name: needs-broken
    steps: [{uses: good}, {id: fetch, uses: broken}]
  - name: needs-absent
    steps: [{uses: absent.handle}]
  - name: calls-broken
    steps: [{id: inner, call: needs-broken}]
`

// TestPipelinesOfAPluginThatDidNotLoadAreSkipped: a pipeline whose uses
// names a skipped or missing plugin (itself or through a call) is skipped
// and recorded with the reason in config.applied; the daemon starts and
// runs the others. A reload refuses such a config (the old one stays),
// unless forced: then it does the same. A DSL error refuses both, forced
// or not.
func TestPipelinesOfAPluginThatDidNotLoadAreSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := skipConfig(t, dir, skipPipelines)
	d, err := daemon.Open(ctx, daemon.Options{StateDir: state, Config: cfg, Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.NoError(t, err)
	defer d.Close()

	require.Equal(t, []string{"fine"}, names(d))
	a, ok, err := daemon.LastApplied(ctx, d.Ledger)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []events.AppliedPipeline{{Name: "fine", Hash: d.Pipelines().Pipelines["fine"].Hash}}, a.Pipelines)
	reasons := map[string]string{}
	for _, s := range a.SkippedPipelines {
		reasons[s.Name] = s.Reason
	}
	require.Len(t, reasons, 3)
	require.Contains(t, reasons["needs-broken"], `step fetch uses plugin "broken", which was skipped: `)
	require.Contains(t, reasons["needs-absent"], `uses plugin "absent", which is not installed`)
	require.Contains(t, reasons["calls-broken"], `step inner/fetch uses plugin "broken"`)

	// A reload refuses a pipeline of a plugin that is not there, as
	// config check does: the old pipelines keep running.
	require.NoError(t, os.WriteFile(cfg.Source, []byte("plugin_roots: ["+filepath.Join(dir, "plugins")+"]\nplugins:\n  good: {}\n"+
		"pipelines:\n  - name: other\n    steps: [{uses: good}]\n  - name: needs-absent\n    steps: [{uses: absent}]\n"), 0o600))
	_, err = d.Reload(ctx, false)
	var refused *daemon.ReloadRefusedError
	require.ErrorAs(t, err, &refused)
	require.True(t, refused.Forceable)
	require.Len(t, refused.Errors, 2, "%v", refused.Errors)
	require.Contains(t, refused.Errors[0], `skipped plugin "broken"`)
	require.Contains(t, refused.Errors[1], `no plugin named "absent" was found`)
	require.Equal(t, []string{"fine"}, names(d))

	// Forced, it skips them and runs the rest, the error recorded.
	reloaded, err := d.Reload(ctx, true)
	require.NoError(t, err)
	require.Equal(t, []string{"other"}, names(d))
	require.Equal(t, []events.SkippedPipeline{{Name: "needs-absent", Reason: `step step1 uses plugin "absent", which is not installed`}}, reloaded.SkippedPipelines)
	require.Equal(t, refused.Errors, reloaded.Errors)

	// A DSL error is the config's: the reload is refused.
	require.NoError(t, os.WriteFile(cfg.Source, []byte("plugin_roots: ["+filepath.Join(dir, "plugins")+"]\nplugins:\n  good: {}\n"+
		"pipelines:\n  - name: typo\n    stepz: [{uses: good}]\n"), 0o600))
	_, err = d.Reload(ctx, true)
	require.ErrorContains(t, err, "stepz")
	require.ErrorAs(t, err, &refused)
	require.False(t, refused.Forceable, "a DSL error is never forced")
	require.Equal(t, []string{"other"}, names(d))
}

// TestPipelineDSLErrorRefusesTheStart: a pipeline the compiler refuses
// refuses the daemon's start, whatever its plugins.
func TestPipelineDSLErrorRefusesTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := skipConfig(t, dir, "pipelines:\n  - name: bad\n    steps: [{uses: broken, if: {path: payload.x, op: nope}}]\n")
	_, err := daemon.Open(context.Background(), daemon.Options{StateDir: filepath.Join(dir, "state"), Config: cfg,
		Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.ErrorContains(t, err, "nope")
}

func names(d *daemon.Daemon) []string {
	var out []string
	for name := range d.Pipelines().Pipelines {
		out = append(out, name)
	}
	return out
}
