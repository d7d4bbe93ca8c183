package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/schedule"
)

// compiled compiles the pipelines of a config document.
func compiled(t *testing.T, doc string) *pipeline.Set {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	set, err := pipeline.Compile(cfg, nil)
	require.NoError(t, err)
	return set
}

// TestPipelineReads: GET /pipelines lists what the daemon runs, sorted,
// each drawn; GET /pipelines/{name} adds the nodes; an unknown name is a
// 404 that suggests one.
func TestPipelineReads(t *testing.T) {
	set := compiled(t, `
pipelines:
  - name: wisdom
    on: echo.done
    steps:
      - id: fetch
        uses: echo
        if: {path: payload.url, op: exists}
      - id: fan
        split:
          - uses: echo.poll
          - uses: sink
  - name: audio
    execution_mode: synchronous
    timeout: 5s
    steps:
      - uses: sink
`)
	f := start(t, func(o *api.Options) {
		eng := engine.New(engine.Options{Ledger: o.Ledger, Config: config.Default(), Applied: applied, Pipelines: set})
		o.Engine = func() *engine.Engine { return eng }
	})

	r := f.do("GET", "/pipelines", "plugin-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var list struct {
		Pipelines []map[string]json.RawMessage `json:"pipelines"`
	}
	require.NoError(t, json.Unmarshal(r.raw, &list))
	require.Len(t, list.Pipelines, 2)
	audio, wisdom := list.Pipelines[0], list.Pipelines[1]
	require.JSONEq(t, `"audio"`, string(audio["name"]))
	require.JSONEq(t, `"synchronous"`, string(audio["execution_mode"]))
	require.JSONEq(t, `"5s"`, string(audio["timeout"]))
	require.JSONEq(t, `"run (API or CLI only)"`, string(audio["trigger"]))
	require.NotContains(t, audio, "on")
	require.NotContains(t, audio, "nodes", "the list leaves the nodes out")
	require.JSONEq(t, `"on: echo.done"`, string(wisdom["trigger"]))
	require.JSONEq(t, `"echo.done"`, string(wisdom["on"]))
	require.JSONEq(t, `4`, string(wisdom["steps"]))
	require.JSONEq(t, `20`, string(wisdom["max_depth"]))
	require.JSONEq(t, `"`+set.Pipelines["wisdom"].Hash+`"`, string(wisdom["hash"]))
	require.Contains(t, string(wisdom["file"]), "config.yaml")
	graph, err := json.Marshal(set.Pipelines["wisdom"].Graph())
	require.NoError(t, err)
	require.JSONEq(t, string(graph), string(wisdom["graph"]), "the graph is the pipeline's Graph")
	require.Contains(t, string(wisdom["graph"]), `{"id":"c1","kind":"gate","node":"fetch","label":"if payload.url exists"}`)

	r = f.do("GET", "/pipelines/wisdom", "plugin-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "on: echo.done", r.body["trigger"])
	require.NotNil(t, r.body["graph"])
	var nodes []string
	for _, n := range r.body["nodes"].([]any) {
		nodes = append(nodes, n.(map[string]any)["id"].(string))
	}
	require.Equal(t, []string{"fetch", "fan", "fan.1", "fan.2"}, nodes, "the nodes in the order they are written")

	r = f.do("GET", "/pipelines/wisdon", "plugin-ro", nil)
	requireError(t, r, http.StatusNotFound, "not_found")
	require.Equal(t, "no pipeline named wisdon in the config the daemon runs: did you mean wisdom?", r.body["message"])
	require.Equal(t, "see: GET /pipelines", r.body["hint"])
	requireError(t, f.do("GET", "/pipelines/"+strings.Repeat("x", 129), "plugin-ro", nil), http.StatusBadRequest, "invalid_input")

	requireError(t, f.do("GET", "/pipelines", "jobs-ro", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("GET", "/pipelines/wisdom", "jobs-ro", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("GET", "/pipelines", "", nil), http.StatusUnauthorized, "unauthorized")
	requireError(t, f.do("GET", "/pipelines/wisdom", "", nil), http.StatusUnauthorized, "unauthorized")
}

// TestPipelineReadsNone: a daemon without pipelines answers an empty list.
func TestPipelineReadsNone(t *testing.T) {
	f := start(t, nil)
	r := f.do("GET", "/pipelines", "plugin-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.JSONEq(t, `{"pipelines": []}`, string(r.raw))
	r = f.do("GET", "/pipelines/any", "plugin-ro", nil)
	requireError(t, r, http.StatusNotFound, "not_found")
}

// TestSchedules: GET /schedules reads the schedules the daemon runs
// (Options.Schedules) as system scheduler does: the last firing from the
// ledger, the next one, the breaker.
func TestSchedules(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fired := now.Add(-time.Hour)
	schedules := []schedule.Schedule{
		{Plugin: "echo", Entry: schedule.Entry{ID: "once", Command: "poll", Kind: schedule.KindAt, At: fired}, Start: fired.Add(-time.Hour)},
		{Plugin: "echo", Entry: schedule.Entry{ID: "later", Command: "poll", Kind: schedule.KindAt, At: now.Add(time.Hour)}, Start: fired.Add(-time.Hour)},
	}
	f := start(t, func(o *api.Options) {
		o.Now = func() time.Time { return now }
		o.Schedules = func() []schedule.Schedule { return schedules }
	})
	_, err := f.l.Append(context.Background(), ledger.NewEvent{Stream: schedules[0].Stream(), Type: events.ScheduleFired,
		Data: events.ScheduleFiredData{Plugin: "echo", ID: "once", Slot: events.Slot{Nominal: fired, Due: fired}, JobID: "job-1",
			Command: "poll", Action: string(schedule.ActionFire), Open: []string{}}})
	require.NoError(t, err)

	r := f.do("GET", "/schedules", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "2026-03-01T12:00:00Z", r.body["now"])
	list := r.body["schedules"].([]any)
	require.Len(t, list, 2)
	once, later := list[0].(map[string]any), list[1].(map[string]any)
	require.Equal(t, "once", once["id"])
	require.Equal(t, "echo", once["plugin"])
	require.Equal(t, "poll", once["command"])
	require.Equal(t, "at 2026-03-01T11:00:00Z", once["when"])
	last := once["last_fired"].(map[string]any)
	require.Equal(t, "job-1", last["job_id"])
	require.Equal(t, "2026-03-01T11:00:00Z", last["slot"].(map[string]any)["due"])
	require.NotEmpty(t, last["recorded_at"])
	require.Nil(t, once["next"], "a one-shot that fired has no next")
	require.Equal(t, "breaker closed", once["breaker"])
	require.Nil(t, later["last_fired"])
	require.Equal(t, "2026-03-01T13:00:00Z", later["next"].(map[string]any)["due"])
	require.NotNil(t, later["next"].(map[string]any)["why"])
	require.NotEmpty(t, later["would"].(map[string]any)["action"])

	requireError(t, f.do("GET", "/schedules", "plugin-ro", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("GET", "/schedules", "", nil), http.StatusUnauthorized, "unauthorized")
}

// TestSchedulesNone: without Options.Schedules, no schedules.
func TestSchedulesNone(t *testing.T) {
	f := start(t, nil)
	r := f.do("GET", "/schedules", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, []any{}, r.body["schedules"])
}
