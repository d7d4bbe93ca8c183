package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/views"
)

// TestPipelineRunsInTheRunResource: GET /runs?kind=pipeline lists pipeline
// runs newest first, by pipeline and status (pipeline= alone implies
// kind=pipeline); GET /runs/{id} answers for one with kind pipeline and its
// steps' runs; the deprecated GET /run/{id} keeps its old shape; a bad
// filter is 400, an unknown run 404.
func TestPipelineRunsInTheRunResource(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"fetch", "fetch", "other"} {
		res, err := commands.StartPipeline(ctx, f.l, commands.StartRun{Pipeline: testPipeline(name, pipeline.ModeAsync, 0),
			Trigger: events.TriggerAPI, SubmittedBy: "api", Config: config.Default(), Now: time.Now()})
		require.NoError(t, err)
		ids = append(ids, res.RunID)
	}
	head, err := f.l.LastSeq(ctx)
	require.NoError(t, err)
	require.NoError(t, f.projector.WaitFor(ctx, head))

	list := func(query string) []views.Run {
		t.Helper()
		r := f.do("GET", "/runs"+query, "jobs-ro", nil)
		require.Equal(t, 200, r.status, string(r.raw))
		var out struct {
			Kind string
			Runs []api.PipelineRunRecord
		}
		require.NoError(t, json.Unmarshal(r.raw, &out))
		require.Equal(t, "pipeline", out.Kind)
		var runs []views.Run
		for _, r := range out.Runs {
			require.Equal(t, "pipeline", r.Kind)
			runs = append(runs, r.Run)
		}
		return runs
	}
	runIDs := func(runs []views.Run) []string {
		var out []string
		for _, r := range runs {
			out = append(out, r.RunID)
		}
		return out
	}
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, runIDs(list("?kind=pipeline")))
	require.Equal(t, []string{ids[1], ids[0]}, runIDs(list("?kind=pipeline&pipeline=fetch")))
	require.Equal(t, []string{ids[1], ids[0]}, runIDs(list("?pipeline=fetch")), "pipeline= implies kind=pipeline")
	require.Equal(t, []string{ids[1]}, runIDs(list("?pipeline=fetch&limit=1")))
	require.Len(t, list("?kind=pipeline&status=running"), 3)
	require.Empty(t, list("?kind=pipeline&status=succeeded"))

	// Without kind, GET /runs lists plugin runs (the pipelines' first jobs).
	r := f.do("GET", "/runs", "jobs-ro", nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "plugin", r.body["kind"])
	for _, run := range r.body["runs"].([]any) {
		require.Equal(t, "plugin", run.(map[string]any)["kind"])
	}

	requireError(t, f.do("GET", "/runs?kind=pipeline&status=bogus", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs?kind=pipeline&status=queued", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs?kind=pipeline&task_id=x", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs?kind=plugin&pipeline=fetch", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs?kind=other", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs?limit=0", "jobs-ro", nil), 400, "invalid_input")

	r = f.do("GET", "/runs/"+ids[0], "jobs-ro", nil)
	require.Equal(t, 200, r.status, string(r.raw))
	var rec api.PipelineRunRecord
	require.NoError(t, json.Unmarshal(r.raw, &rec))
	require.Equal(t, "pipeline", rec.Kind)
	require.Equal(t, ids[0], rec.RunID)
	require.Equal(t, "fetch", rec.Pipeline)
	require.Equal(t, []string{rec.JobID}, rec.ChildRunIDs, "its first step's run")
	// Its child is a plugin run.
	r = f.do("GET", "/runs/"+rec.JobID, "jobs-ro", nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, "plugin", r.body["kind"])

	r = f.do("GET", "/run/"+ids[0], "jobs-ro", nil)
	require.Equal(t, 200, r.status, string(r.raw))
	var run views.Run
	require.NoError(t, json.Unmarshal(r.raw, &run))
	require.Equal(t, ids[0], run.RunID)
	require.Equal(t, "fetch", run.Pipeline)
	require.Equal(t, events.RunRunning, run.Status)
	require.NotEmpty(t, run.JobID)
	require.NotContains(t, r.body, "kind", "the deprecated alias keeps its shape")

	missing := "0190aaaa-0000-7000-8000-000000000000"
	r = f.do("GET", "/run/"+missing, "jobs-ro", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["hint"], "GET /runs?kind=pipeline")
	requireError(t, f.do("GET", "/run/"+strings.Repeat("x", 65), "jobs-ro", nil), 400, "invalid_input")
	r = f.do("GET", "/runs/"+missing, "jobs-ro", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["hint"], "GET /runs")
	requireError(t, f.do("GET", "/runs/"+strings.Repeat("x", 65), "jobs-ro", nil), 400, "invalid_input")
}
