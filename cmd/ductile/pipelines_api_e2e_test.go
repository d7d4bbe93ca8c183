package main_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pipelinesAPIConfig has a schedule and a pipeline with a gate and a split;
// every is replaced by the schedule's interval.
const pipelinesAPIConfig = `
api: {listen: 127.0.0.1:0}
plugins:
  echo:
    schedules: [{id: nightly, every: EVERY, command: handle}]
pipelines:
  - name: fan
    steps:
      - id: first
        uses: echo
        if: {path: payload.go, op: exists}
      - id: both
        split:
          - uses: echo
          - uses: echo
`

// TestPipelinesAndSchedulesOverTheAPI: the daemon's GET /pipelines serves
// the shape pipeline list --json prints (plus trigger and graph), and GET
// /schedules the schedules its scheduler runs, as system scheduler --json
// reads them; after a reload, the new ones.
func TestPipelinesAndSchedulesOverTheAPI(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, strings.Replace(pipelinesAPIConfig, "EVERY", "1h", 1))

	var served struct {
		Pipelines []map[string]any `json:"pipelines"`
	}
	w.doJSON(http.StatusOK, &served, "GET", "/pipelines", nil)
	var listed struct {
		Pipelines []map[string]any `json:"pipelines"`
	}
	w.runJSON(0, &listed, "pipeline", "list", "--json")
	require.Len(t, served.Pipelines, 1)
	require.Len(t, listed.Pipelines, 1)
	api, cli := served.Pipelines[0], listed.Pipelines[0]
	require.Equal(t, "run (API or CLI only)", api["trigger"])
	graph := api["graph"].(map[string]any)
	require.Len(t, graph["vertices"], 8, "start, the gate, first, the split, its two branches, the join and end: %v", graph)
	delete(api, "trigger")
	delete(api, "graph")
	require.Equal(t, true, cli["applied"], "the daemon runs the file's version")
	delete(cli, "applied")
	require.Equal(t, cli, api, "one shape: the API serves what pipeline list prints")

	var one map[string]any
	w.doJSON(http.StatusOK, &one, "GET", "/pipelines/fan", nil)
	require.Len(t, one["nodes"], 4)
	var missing apiError
	w.doJSON(http.StatusNotFound, &missing, "GET", "/pipelines/fna", nil)
	require.Contains(t, missing.Message, "did you mean fan?")

	// schedules reads GET /schedules, requiring when.
	schedules := func() []map[string]any {
		var out struct {
			Now       time.Time        `json:"now"`
			Schedules []map[string]any `json:"schedules"`
		}
		w.doJSON(http.StatusOK, &out, "GET", "/schedules", nil)
		require.False(t, out.Now.IsZero())
		return out.Schedules
	}
	got := schedules()
	require.Len(t, got, 1)
	var scheduler struct {
		Schedules []map[string]any `json:"schedules"`
	}
	w.runJSON(0, &scheduler, "system", "scheduler", "--json")
	require.Len(t, scheduler.Schedules, 1)
	for _, field := range []string{"plugin", "id", "command", "when", "next", "breaker"} {
		require.Equal(t, scheduler.Schedules[0][field], got[0][field], field)
	}
	require.Equal(t, "every 1h", got[0]["when"])
	require.Equal(t, "breaker closed", got[0]["breaker"])

	before, err := os.ReadFile(w.config) // with the token config token create wrote
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(w.config, []byte(strings.Replace(string(before), "every: 1h", "every: 2h", 1)), 0o600))
	mustRun(t, nil, w.args("system", "reload")...)
	got = schedules()
	require.Len(t, got, 1)
	require.Equal(t, "every 2h", got[0]["when"], "the schedules the scheduler runs after the reload")
	w.stopDaemon(w.daemon)
}
