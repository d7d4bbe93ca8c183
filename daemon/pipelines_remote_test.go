package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// TestPipelinesOfARemotePluginCompile: a pipeline whose step uses a plugin
// placed runs_on: remote and not installed here compiles, before any
// worker registered it (its jobs wait for one) and against the
// registration once one did; a registration lacking the step's command
// skips the pipeline at the next reload (a warning in the reload's
// findings, not an error) until a worker registers the command again.
func TestPipelinesOfARemotePluginCompile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "plugins")
	writeLifecyclePlugin(t, root, "good", "{name: handle, type: write}")
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("plugin_roots: ["+root+"]\nplugins:\n  good: {}\n  render: {runs_on: remote}\n"+
		`pipelines:
  - name: draw
    steps: [{uses: good}, {id: paint, uses: render.handle}, {uses: good}]
`), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	d, err := daemon.Open(ctx, daemon.Options{StateDir: filepath.Join(dir, "state"), Config: cfg, Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.NoError(t, err)
	defer d.Close()
	sorted := func() []string { n := names(d); slices.Sort(n); return n }
	require.Equal(t, []string{"draw"}, sorted(), "compiled before any worker registered render")

	register := func(commands ...string) {
		wp := events.WorkerPlugin{Name: "render", Version: "1.0.0"}
		for _, c := range commands {
			wp.Commands = append(wp.Commands, events.AppliedCommand{Name: c, Type: "write"})
		}
		require.NoError(t, d.Engine().RegisterWorker(ctx, events.WorkerRegisteredData{Name: "gpu1", Host: "gpu1.lan", Version: "test",
			Plugins: []events.WorkerPlugin{wp}}))
	}
	register("handle")
	applied, err := d.Reload(ctx, false)
	require.NoError(t, err)
	require.Equal(t, []string{"draw"}, sorted(), "compiled against the registration")
	require.Empty(t, applied.SkippedPipelines)
	require.Empty(t, applied.Errors)

	register("poll") // the worker now registers render without handle
	applied, err = d.Reload(ctx, false)
	require.NoError(t, err)
	require.Empty(t, names(d))
	require.Empty(t, applied.Errors, "a registration is not config: not an error")
	require.Contains(t, applied.SkippedPipelines, events.SkippedPipeline{Name: "draw",
		Reason: `step paint uses plugin "render", which has no command "handle" as its remote workers registered it (its commands: poll)`})
	require.True(t, slices.ContainsFunc(applied.Warnings, func(w string) bool {
		return strings.Contains(w, `pipelines.draw: step paint uses plugin "render", which has no command "handle"`) &&
			strings.Contains(w, "until a worker registers the plugin with that command")
	}), "%v", applied.Warnings)

	register("handle", "poll")
	_, err = d.Reload(ctx, false)
	require.NoError(t, err)
	require.Equal(t, []string{"draw"}, sorted())
}
