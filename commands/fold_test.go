package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

func TestFoldJob(t *testing.T) {
	t.Parallel()
	recovered := func(attempt, next int, requeued bool) func(*jobStream) {
		return func(s *jobStream) {
			s.add(events.JobRecovered, events.Recovered{Attempt: attempt, NextAttempt: next, Requeued: requeued, Reason: "daemon died"})
		}
	}
	tests := []struct {
		name        string
		given       *jobStream
		status      events.Status
		attempt     int
		lastError   string
		nextRetryAt time.Time
		version     int64
		terminal    bool
	}{
		{name: "enqueued", given: job(jobID),
			status: events.StatusQueued, attempt: 1, version: 1},
		{name: "started", given: job(jobID).started(1),
			status: events.StatusRunning, attempt: 1, version: 2},
		{name: "failed, retry scheduled", given: job(jobID).started(1).failed(1, "boom").retry(2, at(time.Minute)),
			status: events.StatusQueued, attempt: 2, lastError: "boom", nextRetryAt: now.Add(time.Minute), version: 4},
		{name: "retry started: the retry time is cleared, the error kept", given: job(jobID).started(1).failed(1, "boom").retry(2, at(time.Minute)).started(2),
			status: events.StatusRunning, attempt: 2, lastError: "boom", version: 5},
		{name: "retry succeeded: the error is cleared", given: job(jobID).started(1).failed(1, "boom").retry(2, at(time.Minute)).started(2).succeeded(2),
			status: events.StatusSucceeded, attempt: 2, version: 6, terminal: true},
		{name: "dead keeps the attempt's error, not the reason", given: job(jobID).started(1).failed(1, "boom").dead(1, "not retryable: boom"),
			status: events.StatusDead, attempt: 1, lastError: "boom", version: 4, terminal: true},
		{name: "dead with no failed attempt takes the reason", given: job(jobID).started(1).dead(1, "gave up"),
			status: events.StatusDead, attempt: 1, lastError: "gave up", version: 3, terminal: true},
		{name: "recovered and requeued", given: apply(job(jobID).started(1), recovered(1, 2, true)),
			status: events.StatusQueued, attempt: 2, lastError: "daemon died", version: 3},
		{name: "recovered on the last attempt, then dead", given: apply(job(jobID, withMaxAttempts(1)).started(1), recovered(1, 2, false)).dead(1, "daemon died, and it had used all 1 attempts"),
			status: events.StatusDead, attempt: 2, lastError: "daemon died", version: 4, terminal: true},
		{name: "cancel requested", given: job(jobID).started(1).cancelRequested(1),
			status: events.StatusCancelRequested, attempt: 1, version: 3},
		{name: "canceled", given: job(jobID).canceled(1),
			status: events.StatusCanceled, attempt: 1, version: 2, terminal: true, lastError: "stop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.given(t, tc.given.events()...)

			j := b.fold(t, jobID)

			require.Equal(t, tc.status, j.Status, "status")
			require.Equal(t, tc.attempt, j.Attempt, "attempt")
			require.Equal(t, tc.lastError, j.LastError, "last error")
			require.Equal(t, tc.nextRetryAt, j.NextRetryAt, "next retry at")
			require.Equal(t, tc.version, j.Version, "version")
			require.Equal(t, tc.terminal, j.Terminal(), "terminal")
			require.Equal(t, jobID, j.Correlation)
			require.Equal(t, tc.given.enq, j.Enqueued)
		})
	}
}

func apply(s *jobStream, fns ...func(*jobStream)) *jobStream {
	for _, fn := range fns {
		fn(s)
	}
	return s
}

func TestFoldJobErrors(t *testing.T) {
	t.Parallel()

	t.Run("no events", func(t *testing.T) {
		t.Parallel()
		_, err := commands.FoldJob(nil)
		require.ErrorIs(t, err, commands.ErrJobNotFound)
		_, err = commands.FoldJob([]ledger.Event{})
		require.ErrorIs(t, err, commands.ErrJobNotFound)
	})

	tests := []struct {
		name  string
		given *jobStream
		msg   string
	}{
		{name: "unknown event type", given: job(jobID).add("job.exploded", map[string]int{"attempt": 1}),
			msg: `fold job/job-1 v2 (job.exploded): unknown job event type "job.exploded"`},
		{name: "unparseable retry time", given: job(jobID).started(1).failed(1, "boom").retry(2, "tomorrow"),
			msg: `fold job/job-1 v4 (job.retry_scheduled): parsing time "tomorrow" as "2006-01-02T15:04:05.999999999Z07:00": cannot parse "tomorrow" as "2006"`},
		{name: "data of the wrong shape", given: job(jobID).started(1).add(events.JobFailed, map[string]string{"attempt": "one"}),
			msg: `fold job/job-1 v3 (job.failed): json: cannot unmarshal string into Go struct field AttemptEnded.attempt of type int`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.given(t, tc.given.events()...)
			evs, err := b.l.ReadStream(b.ctx, jobStreamName)
			require.NoError(t, err)

			_, err = commands.FoldJob(evs)
			require.EqualError(t, err, tc.msg)

			// A command on such a job fails the same way and appends nothing.
			mark := b.mark(t)
			_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Now: now})
			require.EqualError(t, err, "start job: "+tc.msg)
			require.Empty(t, b.since(t, mark))
		})
	}
}

// TestFoldJobCorrelation: the correlation is the first event's, the root
// of the job's tree.
func TestFoldJobCorrelation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := job(jobID)
	s.corr = "root-9"
	s.evs[0].Meta.CorrelationID = "root-9"
	b.given(t, s.started(1).events()...)
	require.Equal(t, "root-9", b.fold(t, jobID).Correlation)

	require.NoError(t, cancel(b))
	evs, err := b.l.ReadStream(b.ctx, jobStreamName)
	require.NoError(t, err)
	m, err := evs[2].Metadata()
	require.NoError(t, err)
	require.Equal(t, ledger.Meta{CorrelationID: "root-9", Actor: events.ActorAPI}, m)
}
