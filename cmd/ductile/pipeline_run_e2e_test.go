package main_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
)

// TestPipelineRunWaitE2E: with a daemon running, pipeline run --wait waits
// for the run and prints its results; a failed run exits 1.
func TestPipelineRunWaitE2E(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, stateDir := filepath.Join(dir, "plugins"), filepath.Join(dir, "state")
	writeTestPlugin(t, root, "echo", "[{name: handle, type: write}]", 0o755)
	fails := writeTestPlugin(t, root, "fails", "[{name: handle, type: write}]", 0o755)
	require.NoError(t, os.WriteFile(filepath.Join(fails, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null\nexit 3\n"), 0o755))
	configPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(configPath, []byte("plugin_roots: ["+root+"]\nplugins:\n  echo: {}\n  fails: {retry: {max_attempts: 1}}\n"+
		"pipelines:\n  - name: fetch\n    steps:\n      - uses: echo.handle\n  - name: broken\n    steps:\n      - uses: fails.handle\n"), 0o600))
	cfg, err := config.Load(configPath)
	require.NoError(t, err)
	set, err := pipeline.Compile(cfg, nil)
	require.NoError(t, err)
	require.NotEmpty(t, set.Pipelines)

	start(t, nil, "system", "start", "--config", configPath, "--state-dir", stateDir).waitLine(t, 0, messageIs("ductile started"))
	r := ductile(t, nil, "--config", configPath, "--state-dir", stateDir, "pipeline", "run", "fetch", "--payload", `{"n":1}`, "--wait", "--timeout", "1m", "--json")
	require.Equal(t, 0, r.code, r.String())
	var out struct {
		Status  events.RunStatus   `json:"status"`
		Results []events.RunResult `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.String())
	require.Equal(t, events.RunSucceeded, out.Status)
	require.Len(t, out.Results, 1)
	require.Equal(t, "echo", out.Results[0].Plugin)
	require.True(t, bytes.Contains(out.Results[0].Result, []byte("echo")), string(out.Results[0].Result))

	r = ductile(t, nil, "--config", configPath, "--state-dir", stateDir, "pipeline", "run", "broken", "--wait", "--timeout", "1m")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stdout, "of pipeline broken failed")
}
