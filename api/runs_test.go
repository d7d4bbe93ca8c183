package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/views"
)

// TestRuns: GET /runs lists runs newest first, by pipeline and status;
// GET /run/{id} reads one; a bad filter is 400, an unknown run 404.
func TestRuns(t *testing.T) {
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
		var out struct{ Runs []views.Run }
		require.NoError(t, json.Unmarshal(r.raw, &out))
		return out.Runs
	}
	runIDs := func(runs []views.Run) []string {
		var out []string
		for _, r := range runs {
			out = append(out, r.RunID)
		}
		return out
	}
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, runIDs(list("")))
	require.Equal(t, []string{ids[1], ids[0]}, runIDs(list("?pipeline=fetch")))
	require.Equal(t, []string{ids[1]}, runIDs(list("?pipeline=fetch&limit=1")))
	require.Len(t, list("?status=running"), 3)
	require.Empty(t, list("?status=succeeded"))

	requireError(t, f.do("GET", "/runs?status=bogus", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs?limit=0", "jobs-ro", nil), 400, "invalid_input")

	r := f.do("GET", "/run/"+ids[0], "jobs-ro", nil)
	require.Equal(t, 200, r.status, string(r.raw))
	var run views.Run
	require.NoError(t, json.Unmarshal(r.raw, &run))
	require.Equal(t, ids[0], run.RunID)
	require.Equal(t, "fetch", run.Pipeline)
	require.Equal(t, events.RunRunning, run.Status)
	require.NotEmpty(t, run.JobID)

	r = f.do("GET", "/run/0190aaaa-0000-7000-8000-000000000000", "jobs-ro", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["hint"], "GET /runs")
	requireError(t, f.do("GET", "/run/"+strings.Repeat("x", 65), "jobs-ro", nil), 400, "invalid_input")
}
