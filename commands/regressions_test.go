package commands_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Regression tests for bugs found while writing this suite; each asserts
// what the spec asks for and failed against the code of its day.

// A job with a dedupe key that routes an event to its own target (same
// plugin and command) with the inherited key: the release of the parent's
// key and the child's reservation go to one dedupe stream in one append;
// the reservation expects the version read before the release, so the
// whole completion fails with a version conflict and the job stays running
// for ever. The child should be a duplicate of the parent, which has just
// succeeded within the window (spec §3.6).
func TestRegressionChildOnTheParentsOwnDedupeStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, parent().events()...)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
		Children: []commands.Enqueue{child("echo", func(c *commands.Enqueue) { c.Command = "poll" })}})
	require.NoError(t, err)
	require.Equal(t, []commands.EnqueueResult{{Deduped: true, ExistingJobID: "p1"}}, res.Children)
	require.Equal(t, events.StatusSucceeded, b.fold(t, "p1").Status)
}

// MaxStateBytes lowers the limit, but the error names the default one.
func TestRegressionStateTooLargeNamesTheLimitApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, parent().events()...)
	out := outOK
	out.StateUpdates = raw(`{"blob":"` + strings.Repeat("x", 200) + `"}`)
	_, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: out, MaxStateBytes: 100,
		Jitter: fixedJitter(0), Now: now})
	require.NoError(t, err)
	evs := b.since(t, 0)
	var failed string
	for _, ev := range evs {
		if ev.Type == events.JobFailed {
			failed = string(ev.Data)
		}
	}
	require.Contains(t, failed, `"error":"state update exceeds the 100 byte limit"`)
}

// An envelope that is not JSON is a bad command (a 400 at the API), not an
// invalid ledger event (a 500).
func TestRegressionEnqueueValidatesTheEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.Event = raw(`{"type":`) }))
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	require.EqualError(t, err, "enqueue job: invalid command: event is not valid JSON")
}

// base·2^(attempt−1) overflows time.Duration from attempt 30 with a 30s
// base (max_attempts has no upper bound in config), giving a negative delay:
// the retry is scheduled in the past.
func TestRegressionBackoffOverflows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := job(jobID, withMaxAttempts(40))
	for a := 1; a < 30; a++ {
		s.started(a).failed(a, "boom").retry(a+1, at(0))
	}
	b.given(t, s.started(30).events()...)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: 30, Outcome: outFailed, Jitter: fixedJitter(0), Now: now})
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, res.Status)
	require.False(t, res.NextRetryAt.Before(now.Add(30*time.Second)), "retry at %s, before now+base", res.NextRetryAt)
}

// The dedupe.released that a cancel or a recovery appends says the
// dispatcher did it.
func TestRegressionReleaseActor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, keyed(jobID).events()...)
	mark := b.mark(t)
	require.NoError(t, cancel(b))
	evs := b.since(t, mark)
	require.Len(t, evs, 2)
	require.JSONEq(t, `{"correlation_id":"job-1","actor":"api"}`, string(evs[1].Meta))
}

// A shutdown that interrupts the last attempt must not bury the job: the
// attempt does not count, and the job runs again at once.
func TestRegressionInterruptedLastAttemptIsRequeued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job(jobID, withMaxAttempts(1)).started(1).events()...)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: 1, Now: now,
		Outcome: commands.Outcome{Kind: events.OutcomeInterrupted, Retryable: true, Error: "the daemon is shutting down"}})
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, res.Status)
	require.Equal(t, now, res.NextRetryAt)
	j := b.fold(t, jobID)
	require.Equal(t, events.StatusQueued, j.Status)
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, 2, j.MaxAttempts, "the interrupted attempt is given back")
	_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Now: now})
	require.NoError(t, err, "due at once")
}
