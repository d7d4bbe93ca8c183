// Named api_at_test.go so that it runs before TestZOpenAPIResponsesAreReal
// (api_test.go), which needs the 410 it produces.
package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// mark is the ledger's head.
func (f *fixture) mark() int64 {
	f.t.Helper()
	seq, err := f.l.LastSeq(context.Background())
	require.NoError(f.t, err)
	return seq
}

// TestJobTreeAt: GET /job/{id}/tree?at= shows the tree as it was at a seq
// or a time, 404 before its root, 400 for a moment that is neither, 410
// (archived) for one whose events an archive moved; without at the body
// has no moment in it.
func TestJobTreeAt(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	old := f.enqueue(`{"n": 0}`)
	_, err := commands.StartJob(ctx, f.l, commands.Start{JobID: old, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	_, err = commands.CompleteJob(ctx, f.l, commands.Complete{JobID: old, Attempt: 1, Outcome: commands.Outcome{Kind: events.OutcomeOK}, Now: time.Now()})
	require.NoError(t, err)
	f.waitProjected()
	boundary := time.Now()

	id := f.enqueue(`{"n": 1}`)
	queuedAt := f.mark()
	_, err = commands.StartJob(ctx, f.l, commands.Start{JobID: id, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	runningAt := f.mark()
	f.waitProjected()

	status := func(r response) string {
		t.Helper()
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		jobs := r.body["jobs"].([]any)
		require.Len(t, jobs, 1)
		return jobs[0].(map[string]any)["status"].(string)
	}
	r := f.do("GET", "/job/"+id+"/tree?at="+strconv.FormatInt(queuedAt, 10), "jobs-ro", nil)
	require.Equal(t, "queued", status(r))
	require.Equal(t, float64(queuedAt), r.body["at_seq"])
	r = f.do("GET", "/job/"+id+"/tree?at="+strconv.FormatInt(runningAt, 10), "jobs-ro", nil)
	require.Equal(t, "running", status(r))
	r = f.do("GET", "/job/"+id+"/tree?at="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "jobs-ro", nil)
	require.Equal(t, "running", status(r))
	require.Equal(t, float64(runningAt), r.body["at_seq"])

	r = f.do("GET", "/job/"+id+"/tree", "jobs-ro", nil)
	require.Equal(t, "running", status(r))
	require.NotContains(t, r.body, "at_seq", "without at, the tree as it is now, as before")
	require.NotContains(t, r.body, "at")

	r = f.do("GET", "/job/"+id+"/tree?at=yesterday", "jobs-ro", nil)
	requireError(t, r, 400, "invalid_input")
	require.Contains(t, r.body["message"], "neither a seq")
	r = f.do("GET", "/job/"+id+"/tree?at="+strconv.FormatInt(queuedAt-1, 10), "jobs-ro", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["message"], "did not exist yet")

	_, archive, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: boundary}.Run(ctx, f.l)
	require.NoError(t, err)
	require.Positive(t, archive.LastSeq)
	r = f.do("GET", "/job/"+id+"/tree?at=1", "jobs-ro", nil)
	requireError(t, r, 410, "archived")
	require.Contains(t, r.body["message"], "archive boundary")
	require.Equal(t, "running", status(f.do("GET", "/job/"+id+"/tree?at="+strconv.FormatInt(runningAt, 10), "jobs-ro", nil)))
}
