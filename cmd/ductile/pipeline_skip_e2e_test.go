package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// TestSkippedPipelineE2E: a daemon whose config has a pipeline using a
// plugin that is not installed starts, runs the other pipelines, and
// config show --applied names the skipped one and why.
func TestSkippedPipelineE2E(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, stateDir := filepath.Join(dir, "plugins"), filepath.Join(dir, "state")
	writeTestPlugin(t, root, "echo", "[{name: handle, type: write}]", 0o755)
	configPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(configPath, []byte("plugin_roots: ["+root+"]\nplugins:\n  echo: {}\n"+
		"pipelines:\n  - name: fetch\n    steps:\n      - uses: echo.handle\n  - name: orphan\n    steps:\n      - uses: gone.handle\n"), 0o600))

	start(t, nil, "system", "start", "--config", configPath, "--state-dir", stateDir).waitLine(t, 0, messageIs("ductile started"))
	r := ductile(t, nil, "--config", configPath, "--state-dir", stateDir, "config", "show", "--applied", "--json")
	require.Equal(t, 0, r.code, r.String())
	var out struct {
		Pipelines        []events.AppliedPipeline `json:"pipelines"`
		SkippedPipelines []events.SkippedPipeline `json:"skipped_pipelines"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.String())
	require.Len(t, out.Pipelines, 1)
	require.Equal(t, "fetch", out.Pipelines[0].Name)
	require.Equal(t, []events.SkippedPipeline{{Name: "orphan", Reason: `step step1 uses plugin "gone", which is not installed`}}, out.SkippedPipelines)

	r = ductile(t, nil, "--config", configPath, "--state-dir", stateDir, "config", "show", "--applied")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, `# pipeline orphan skipped: step step1 uses plugin "gone", which is not installed`)

	// A reload of a config whose pipeline names a missing plugin is
	// refused, as config check refuses it; --force applies it, skipping
	// the pipeline, and says so.
	require.NoError(t, os.WriteFile(configPath, []byte("plugin_roots: ["+root+"]\nplugins:\n  echo: {}\n"+
		"pipelines:\n  - name: fetch\n    steps:\n      - uses: echo.handle\n  - name: orphan\n    steps:\n      - uses: gone2.handle\n"), 0o600))
	r = ductile(t, nil, "--config", configPath, "--state-dir", stateDir, "system", "reload")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, `uses: no plugin named "gone2" was found`)
	r = ductile(t, nil, "--config", configPath, "--state-dir", stateDir, "system", "reload", "--force")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stderr, `warning: pipeline orphan is skipped (it does not run): step step1 uses plugin "gone2", which is not installed`)
}
