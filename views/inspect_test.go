package views_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// TestInspectShowsAttemptsEventsAndRetryLinks: a dead job shows its
// attempt and every event of its stream; retried, it names the job that
// retries it, which names it back. A prefix finds it too.
func TestInspectShowsAttemptsEventsAndRetryLinks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.enqueue(t, "echo", 1)
	b.start(t, old)
	b.complete(t, old, 1, failed("boom\n"))
	res, err := commands.RetryJob(b.ctx, b.l, commands.Retry{JobID: old, MaxAttempts: 1, BackoffBase: time.Second, Now: now})
	require.NoError(t, err)
	b.project(t)

	in, err := views.Inspect(b.ctx, b.l, strings.ToUpper(old[:24]))
	require.NoError(t, err)
	require.Equal(t, old, in.Job.ID)
	require.Equal(t, events.StatusDead, in.Job.Status)
	require.Len(t, in.Attempts, 1)
	a := in.Attempts[0]
	require.Equal(t, int64(1), a.Attempt)
	require.Equal(t, "boom", *a.Error)
	require.Equal(t, "boom\n", *a.Stderr)
	require.Equal(t, res.JobID, in.RetriedAs)
	require.Empty(t, in.RetryOf)
	require.Nil(t, in.Cancel)
	require.Empty(t, in.Children)
	evs, err := b.l.ReadStream(b.ctx, events.JobStream(old))
	require.NoError(t, err)
	require.Len(t, in.Events, len(evs))
	for i, ev := range evs {
		require.Equal(t, views.EventOf(ev), in.Events[i])
	}
	require.Equal(t, []string{"job", "retried_as", "attempts", "events", "children"}, jsonKeys(t, in))

	in, err = views.Inspect(b.ctx, b.l, res.JobID)
	require.NoError(t, err)
	require.Equal(t, old, in.RetryOf)
	require.Empty(t, in.Attempts)
	require.NotNil(t, in.Attempts, "no attempts: [] in JSON, not null")
}

// TestInspectShowsACancelAndChildren: a running job's cancel shows who
// asked, why, and that it is pending until the job is canceled, then how
// it ended; a job that routed children lists them.
func TestInspectShowsACancelAndChildren(t *testing.T) {
	t.Parallel()
	b := setup(t)
	parent := b.enqueue(t, "echo", 1)
	b.start(t, parent)
	b.complete(t, parent, 1, ok, commands.Enqueue{Plugin: "notify", Command: "handle", MaxAttempts: 1})
	id := b.enqueue(t, "echo", 1)
	b.start(t, id)
	b.cancel(t, id, "stop it")
	b.project(t)

	in, err := views.Inspect(b.ctx, b.l, parent)
	require.NoError(t, err)
	require.Len(t, in.Children, 1)
	require.Equal(t, "notify", in.Children[0].Plugin)
	require.Equal(t, parent, *in.Children[0].ParentJobID)

	in, err = views.Inspect(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, events.StatusCancelRequested, in.Job.Status)
	require.Equal(t, &views.Cancel{Reason: "stop it", By: string(events.ActorCLI), RequestedAt: in.Cancel.RequestedAt, Pending: true}, in.Cancel)
	require.NotEmpty(t, in.Cancel.RequestedAt)

	b.complete(t, id, 1, commands.Outcome{Kind: events.OutcomeCanceled, Error: "plugin stopped"})
	in, err = views.Inspect(b.ctx, b.l, id)
	require.NoError(t, err)
	require.False(t, in.Cancel.Pending)
	require.Equal(t, "stop it", in.Cancel.Reason)
	require.NotEmpty(t, in.Cancel.Ended, "the end's reason, which differs from the request's")
}

// TestInspectAJobNotProjectedYet: a job another process enqueued, not
// projected yet, shows its id and its events; an unknown one is a
// *JobNotFoundError.
func TestInspectAJobNotProjectedYet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 1)
	in, err := views.Inspect(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, views.Job{ID: id}, in.Job)
	require.Len(t, in.Events, 1)
	require.Equal(t, events.JobEnqueued, in.Events[0].Type)

	_, err = views.Inspect(b.ctx, b.l, "ffffffff")
	var notFound *views.JobNotFoundError
	require.ErrorAs(t, err, &notFound)
}
