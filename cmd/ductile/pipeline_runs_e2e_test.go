package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// TestPipelineRunsE2E: with a daemon running, pipeline runs and pipeline
// status show the runs it made; pipeline list, show and run say when the
// config file's version of a pipeline is not the one the daemon applied.
func TestPipelineRunsE2E(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, stateDir := filepath.Join(dir, "plugins"), filepath.Join(dir, "state")
	writeTestPlugin(t, root, "echo", "[{name: handle, type: write}]", 0o755)
	configPath := filepath.Join(dir, "config.yaml")
	head := "plugin_roots: [" + root + "]\nplugins:\n  echo: {}\npipelines:\n  - name: fetch\n    steps:\n      - uses: echo.handle\n"
	require.NoError(t, os.WriteFile(configPath, []byte(head), 0o600))
	start(t, nil, "system", "start", "--config", configPath, "--state-dir", stateDir).waitLine(t, 0, messageIs("ductile started"))
	cli := func(args ...string) result {
		return ductile(t, nil, append([]string{"--config", configPath, "--state-dir", stateDir}, args...)...)
	}

	r := cli("pipeline", "run", "fetch", "--wait", "--timeout", "1m", "--json")
	require.Equal(t, 0, r.code, r.String())
	var started struct {
		RunID   string `json:"run_id"`
		Applied *bool  `json:"applied"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &started), r.String())
	require.NotNil(t, started.Applied)
	require.True(t, *started.Applied)

	r = cli("pipeline", "runs", "fetch", "--json")
	require.Equal(t, 0, r.code, r.String())
	var runs struct {
		Runs []struct {
			RunID  string           `json:"run_id"`
			Status events.RunStatus `json:"status"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &runs), r.String())
	require.Len(t, runs.Runs, 1)
	require.Equal(t, started.RunID, runs.Runs[0].RunID)
	require.Equal(t, events.RunSucceeded, runs.Runs[0].Status)
	r = cli("pipeline", "runs", "--status", "failed")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "no pipeline runs match")
	r = cli("pipeline", "runs", "--status", "bogus")
	require.Equal(t, 2, r.code, r.String())

	r = cli("pipeline", "runs")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "\n"+started.RunID[24:]+"  fetch ", "runs prints short ids")
	for _, id := range []string{started.RunID, started.RunID[24:], started.RunID[24:31]} {
		r = cli("pipeline", "status", id)
		require.Equal(t, 0, r.code, r.String())
		require.Contains(t, r.stdout, "run "+started.RunID+" of pipeline fetch: succeeded")
	}
	require.Contains(t, r.stdout, "result step1: echo handle")
	require.Contains(t, r.stdout, " succeeded: echo\n", "a string result prints as text, as pipeline run --wait prints it")
	r = cli("pipeline", "status", "0190aaaa-0000-7000-8000-000000000000", "--json")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, `"not_found"`)

	// The file changes; the daemon still runs the version it applied.
	require.NoError(t, os.WriteFile(configPath, []byte(head+"      - uses: echo.handle\n"), 0o600))
	r = cli("pipeline", "list", "--json")
	require.Equal(t, 0, r.code, r.String())
	var list struct {
		Pipelines []struct {
			Name    string `json:"name"`
			Applied *bool  `json:"applied"`
		} `json:"pipelines"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.String())
	require.Len(t, list.Pipelines, 1)
	require.NotNil(t, list.Pipelines[0].Applied)
	require.False(t, *list.Pipelines[0].Applied)
	r = cli("pipeline", "list")
	require.Contains(t, r.stdout, "# not applied yet")
	r = cli("pipeline", "show", "fetch")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "# not applied yet: the running daemon")
	r = cli("pipeline", "run", "fetch")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "# not applied yet")
}
