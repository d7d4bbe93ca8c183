package views_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

func ids(jobs []views.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// TestListJobsFiltersNewestFirst: job list reads the projection, newest
// first, by status and plugin, up to a limit; a listing of nothing is an
// empty list, and an unknown status an error.
func TestListJobsFiltersNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.enqueue(t, "echo", 1)
	f := b.enqueue(t, "fetch", 1)
	c := b.enqueue(t, "echo", 1)
	b.start(t, c)
	b.start(t, f)
	b.complete(t, f, 1, ok)

	list := func(filter views.JobFilter) []string {
		t.Helper()
		jobs, err := views.ListJobs(b.ctx, b.l, filter)
		require.NoError(t, err)
		require.NotNil(t, jobs)
		return ids(jobs)
	}
	require.Empty(t, list(views.JobFilter{Limit: 50}), "nothing projected yet")
	b.project(t)
	require.Equal(t, []string{c, f, a}, list(views.JobFilter{Limit: 50}))
	require.Equal(t, []string{c}, list(views.JobFilter{Limit: 1}))
	require.Equal(t, []string{a}, list(views.JobFilter{Status: events.StatusQueued, Limit: 50}))
	require.Equal(t, []string{c}, list(views.JobFilter{Status: events.StatusRunning, Limit: 50}))
	require.Equal(t, []string{f}, list(views.JobFilter{Status: events.StatusSucceeded, Limit: 50}))
	require.Equal(t, []string{c, a}, list(views.JobFilter{Plugin: "echo", Limit: 50}))
	require.Equal(t, []string{}, list(views.JobFilter{Status: events.StatusDead, Limit: 50}))

	_, err := views.ListJobs(b.ctx, b.l, views.JobFilter{Status: "lost", Limit: 50})
	require.ErrorContains(t, err, `no status "lost"`)

	jobs, err := views.ListJobs(b.ctx, b.l, views.JobFilter{Status: events.StatusSucceeded, Limit: 50})
	require.NoError(t, err)
	j := jobs[0]
	require.Equal(t, "fetch", j.Plugin)
	require.Equal(t, "poll", j.Command)
	require.Equal(t, int64(1), j.Attempt)
	require.Equal(t, int64(1), j.MaxAttempts)
	require.Equal(t, f, j.CorrelationID)
	require.NotNil(t, j.CompletedAt)
	require.Equal(t, []string{"job_id", "seq", "plugin", "command", "status", "attempt", "max_attempts", "submitted_by",
		"created_at", "started_at", "completed_at", "correlation_id", "updated_seq"}, jsonKeys(t, j), "the JSON shape, in order")
}

// TestReadQueueCountsAndListsInRunOrder: the queue counts its jobs by
// status and lists them oldest first up to the limit (0: all), saying how
// many it left out.
func TestReadQueueCountsAndListsInRunOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	running := b.enqueue(t, "echo", 1)
	stopping := b.enqueue(t, "echo", 1)
	q1 := b.enqueue(t, "echo", 1)
	q2 := b.enqueue(t, "fetch", 1)
	done := b.enqueue(t, "echo", 1)
	b.start(t, running)
	b.start(t, stopping)
	b.cancel(t, stopping, "stop")
	b.start(t, done)
	b.complete(t, done, 1, ok)
	b.project(t)

	q, err := views.ReadQueue(b.ctx, b.l, 0)
	require.NoError(t, err)
	require.Equal(t, views.QueueCounts{Queued: 2, Running: 1, CancelRequested: 1}, q.Counts)
	require.Equal(t, int64(4), q.Counts.Total())
	require.Equal(t, []string{running, stopping, q1, q2}, ids(q.Jobs))
	require.Zero(t, q.More)

	q, err = views.ReadQueue(b.ctx, b.l, 3)
	require.NoError(t, err)
	require.Equal(t, []string{running, stopping, q1}, ids(q.Jobs))
	require.Equal(t, int64(1), q.More)
	require.Equal(t, []string{"counts", "active", "more"}, jsonKeys(t, q))

	empty := setup(t)
	q, err = views.ReadQueue(empty.ctx, empty.l, 50)
	require.NoError(t, err)
	require.NotNil(t, q.Jobs, "an empty queue lists [] in JSON, not null")
	require.Zero(t, q.Counts.Total())
}
