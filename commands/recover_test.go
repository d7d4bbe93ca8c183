package commands_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// TestRecoverJob is crash recovery (spec §11.2): given a job the dead
// process left behind, when it is recovered, then these events.
func TestRecoverJob(t *testing.T) {
	t.Parallel()
	const reason = "daemon restarted"
	tests := []struct {
		name   string
		given  *jobStream
		result commands.RecoverResult
		want   []want
		// folded afterwards
		status  events.Status
		attempt int
	}{
		{name: "running attempt 1 of 4: requeued for attempt 2", given: keyed("job-1").started(1),
			result: commands.RecoverResult{Recovered: true, Status: events.StatusQueued, Attempt: 1, NextAttempt: 2},
			want:   []want{jobEv(3, events.JobRecovered, `{"attempt":1,"next_attempt":2,"requeued":true,"reason":"daemon restarted"}`)},
			status: events.StatusQueued, attempt: 2},
		{name: "running attempt 3 of 4: requeued for attempt 4",
			given:  keyed("job-1").started(1).failed(1, "boom").retry(2, at(0)).started(2).failed(2, "boom").retry(3, at(0)).started(3),
			result: commands.RecoverResult{Recovered: true, Status: events.StatusQueued, Attempt: 3, NextAttempt: 4},
			want:   []want{jobEv(9, events.JobRecovered, `{"attempt":3,"next_attempt":4,"requeued":true,"reason":"daemon restarted"}`)},
			status: events.StatusQueued, attempt: 4},
		{name: "running the last attempt: dead, key released", given: keyed("job-1", withMaxAttempts(1)).started(1),
			result: commands.RecoverResult{Recovered: true, Status: events.StatusDead, Attempt: 1, NextAttempt: 2},
			want: []want{
				jobEv(3, events.JobRecovered, `{"attempt":1,"next_attempt":2,"requeued":false,"reason":"daemon restarted"}`),
				jobEv(4, events.JobDead, `{"attempt":1,"reason":"daemon restarted, and it had used all 1 attempts"}`),
				{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased,
					Data: `{"job_id":"job-1","status":"dead","completed_at":"2026-03-01T12:00:00Z"}`},
			},
			// spec §11.2 increments the attempt before deciding: dead at 2 of 1.
			status: events.StatusDead, attempt: 2},
		{name: "cancel requested: canceled, key released", given: keyed("job-1").started(1).cancelRequested(1),
			result: commands.RecoverResult{Recovered: true, Status: events.StatusCanceled, Attempt: 1, NextAttempt: 1},
			want: []want{
				jobEv(4, events.JobCanceled, `{"attempt":1,"reason":"cancel requested; daemon restarted"}`),
				{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased,
					Data: `{"job_id":"job-1","status":"canceled","completed_at":"2026-03-01T12:00:00Z"}`},
			},
			status: events.StatusCanceled, attempt: 1},
		{name: "queued: nothing to do", given: keyed("job-1"),
			result: commands.RecoverResult{Status: events.StatusQueued, Attempt: 1},
			status: events.StatusQueued, attempt: 1},
		{name: "queued for a retry: nothing to do", given: keyed("job-1").started(1).failed(1, "boom").retry(2, at(0)),
			result: commands.RecoverResult{Status: events.StatusQueued, Attempt: 2},
			status: events.StatusQueued, attempt: 2},
		{name: "succeeded: nothing to do", given: keyed("job-1").started(1).succeeded(1),
			result: commands.RecoverResult{Status: events.StatusSucceeded, Attempt: 1},
			status: events.StatusSucceeded, attempt: 1},
		{name: "dead: nothing to do", given: keyed("job-1").started(1).failed(1, "boom").dead(1, "boom"),
			result: commands.RecoverResult{Status: events.StatusDead, Attempt: 1},
			status: events.StatusDead, attempt: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.given(t, tc.given.events()...)
			mark := b.mark(t)

			res, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: jobID, Reason: reason, Now: now})

			require.NoError(t, err)
			require.Equal(t, tc.result, res)
			got := b.since(t, mark)
			requireEvents(t, tc.want, got)
			for _, ev := range got {
				require.Equal(t, got[0].RecordedAt, ev.RecordedAt, "one transaction")
				m, err := ev.Metadata()
				require.NoError(t, err)
				require.Equal(t, jobID, m.CorrelationID)
				require.Equal(t, events.ActorRecovery, m.Actor, "%s %s", ev.Stream, ev.Type)
			}
			j := b.fold(t, jobID)
			require.Equal(t, tc.status, j.Status)
			require.Equal(t, tc.attempt, j.Attempt)
		})
	}
}

// TestRecoveredJobRunsAgain: a recovered job is due at once and its next
// attempt is the one recovery announced; completing the dead attempt is
// refused.
func TestRecoveredJobRunsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job(jobID).started(1).events()...)
	_, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: jobID, Now: now})
	require.NoError(t, err)
	require.Equal(t, "the process running it stopped before it finished", b.fold(t, jobID).LastError)

	// The old process's late completion of attempt 1 is refused.
	err = complete(1, outOK)(b)
	require.ErrorIs(t, err, commands.ErrInvalidTransition)
	require.EqualError(t, err, "complete job: job job-1 is queued: cannot complete an attempt")

	started, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Now: now})
	require.NoError(t, err)
	require.Equal(t, 2, started.Attempt)
	err = complete(1, outOK)(b)
	require.EqualError(t, err, "complete job: job job-1 is running on attempt 2: cannot complete attempt 1")
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: 2, Outcome: outOK, Now: now})
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, res.Status)
}
