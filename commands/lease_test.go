package commands_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// leased adds a remote worker's claim of attempt to s: job.started with a
// lease whose fence is its version, until now+until.
func (s *jobStream) leased(attempt int, worker string, until time.Duration) *jobStream {
	return s.add(events.JobStarted, events.Started{Attempt: attempt, DeadlineAt: at(time.Hour), Worker: &events.Worker{Name: worker},
		Lease: &events.Lease{Worker: worker, Fence: s.version + 1, LeaseUntil: at(until)}})
}

// Given a queued job, when a worker claims it, then job.started records
// the lease: the worker, the fence (the event's version) and lease_until.
func TestClaimRecordsTheLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("j1").events()...)
	mark := b.mark(t)
	st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: "j1", Timeout: time.Minute, Worker: &events.Worker{Name: "w1", PID: 9},
		LeasePeriod: 30 * time.Second, Now: now})
	require.NoError(t, err)
	require.Equal(t, &events.Lease{Worker: "w1", Fence: 2, LeaseUntil: at(30 * time.Second)}, st.Lease)
	require.Equal(t, now.Add(time.Minute), st.DeadlineAt)
	requireEvents(t, []want{{Stream: "job/j1", Version: 2, Type: events.JobStarted,
		Data: `{"attempt":1,"deadline_at":"` + at(time.Minute) + `","worker":{"name":"w1","pid":9},"lease":{"worker":"w1","fence":2,"lease_until":"` + at(30*time.Second) + `"}}`,
		Meta: `{"correlation_id":"j1","actor":"worker"}`}}, b.since(t, mark))
	require.Equal(t, st.Lease, b.fold(t, "j1").Leased())

	_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: "j1", Timeout: time.Minute, LeasePeriod: time.Second, Now: now})
	require.ErrorIs(t, err, commands.ErrInvalidTransition, "claimed once")
}

// Given a leased job, renewals within a third of the period record
// nothing; the first past it records job.lease_renewed; a cancel request
// is in the answer.
func TestRenewLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("j1").leased(1, "w1", 30*time.Second).events()...)
	f := commands.Fenced{Worker: "w1", Attempt: 1, Fence: 2}
	mark := b.mark(t)
	r, err := commands.RenewLease(b.ctx, b.l, commands.Renew{JobID: "j1", Fenced: f, Period: 30 * time.Second, Now: now.Add(9 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, commands.Renewed{LeaseUntil: now.Add(30 * time.Second), DeadlineAt: now.Add(time.Hour)}, r)
	require.Empty(t, b.since(t, mark), "coalesced")

	r, err = commands.RenewLease(b.ctx, b.l, commands.Renew{JobID: "j1", Fenced: f, Period: 30 * time.Second, Now: now.Add(10 * time.Second)})
	require.NoError(t, err)
	require.True(t, r.Recorded)
	requireEvents(t, []want{{Stream: "job/j1", Version: 3, Type: events.JobLeaseRenewed,
		Data: `{"attempt":1,"fence":2,"lease_until":"` + at(40*time.Second) + `"}`}}, b.since(t, mark))
	require.Equal(t, at(40*time.Second), b.fold(t, "j1").Leased().LeaseUntil)

	b.given(t, ledger.NewEvent{Stream: "job/j1", ExpectedVersion: 3, Type: events.JobCancelRequested, Data: events.Canceled{Attempt: 1, Reason: "stop"}})
	r, err = commands.RenewLease(b.ctx, b.l, commands.Renew{JobID: "j1", Fenced: f, Period: 30 * time.Second, Now: now.Add(11 * time.Second)})
	require.NoError(t, err)
	require.True(t, r.CancelRequested)
}

// Given a job claimed again (fence 4), a completion, renewal or log batch
// with the first claim's fence (2) is recorded as job.superseded and
// nothing else; a *StaleFenceError says so.
func TestStaleFencesAreSuperseded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := job("j1").leased(1, "w1", 30*time.Second)
	s.add(events.JobRecovered, events.Recovered{Attempt: 1, NextAttempt: 2, Requeued: true, Reason: commands.LeaseExpiredReason})
	s.leased(2, "w2", time.Minute)
	b.given(t, s.events()...)
	old := commands.Fenced{Worker: "w1", Attempt: 1, Fence: 2}

	mark := b.mark(t)
	_, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "j1", Attempt: 1, Outcome: commands.Outcome{Kind: events.OutcomeOK}, Now: now, Fence: &old})
	var stale *commands.StaleFenceError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, &commands.StaleFenceError{JobID: "j1", Refused: events.RefusedComplete, Fence: 2, Current: 4, Status: events.StatusRunning}, stale)
	_, err = commands.RenewLease(b.ctx, b.l, commands.Renew{JobID: "j1", Fenced: old, Period: time.Minute, Now: now})
	require.ErrorIs(t, err, commands.ErrStaleFence)
	err = commands.RecordStderr(b.ctx, b.l, commands.StderrLines{JobID: "j1", Attempt: 1, Line: 1, Lines: []events.StderrLine{{At: at(0), Text: "x"}}, Fence: &old})
	require.ErrorIs(t, err, commands.ErrStaleFence)
	requireEvents(t, []want{
		{Stream: "job/j1", Version: 5, Type: events.JobSuperseded, Data: `{"refused":"complete","worker":"w1","attempt":1,"fence":2,"current_fence":4,"status":"running","kind":"ok"}`},
		{Stream: "job/j1", Version: 6, Type: events.JobSuperseded, Data: `{"refused":"renew","worker":"w1","attempt":1,"fence":2,"current_fence":4,"status":"running"}`},
		{Stream: "job/j1", Version: 7, Type: events.JobSuperseded, Data: `{"refused":"log","worker":"w1","attempt":1,"fence":2,"current_fence":4,"status":"running"}`},
	}, b.since(t, mark))
	j := b.fold(t, "j1")
	require.Equal(t, events.StatusRunning, j.Status)
	require.Equal(t, int64(4), j.Leased().Fence, "the current lease is untouched")

	current := commands.Fenced{Worker: "w2", Attempt: 2, Fence: 4}
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "j1", Attempt: 2, Outcome: commands.Outcome{Kind: events.OutcomeOK}, Now: now, Fence: &current})
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, res.Status)
	_, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "j1", Attempt: 2, Outcome: commands.Outcome{Kind: events.OutcomeOK}, Now: now, Fence: &current})
	require.True(t, errors.As(err, &stale) && stale.Current == 0 && stale.Status == events.StatusSucceeded, "a job completes once: %v", err)
}

// Start-up recovery skips a leased job; the sweeper's recovery ends it
// only under the fence it read.
func TestRecoverRespectsLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("remote", withMaxAttempts(1)).leased(1, "w1", time.Second).events()...)
	b.given(t, job("local").started(1).events()...)

	for _, id := range []string{"remote", "local"} {
		res, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: id, SkipLeased: true, Now: now})
		require.NoError(t, err)
		require.Equal(t, id == "local", res.Recovered, id)
	}
	res, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: "remote", Fence: 9, Reason: commands.LeaseExpiredReason, Now: now})
	require.NoError(t, err)
	require.False(t, res.Recovered, "another lease holds it")
	res, err = commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: "remote", Fence: 2, Reason: commands.LeaseExpiredReason, Now: now})
	require.NoError(t, err)
	require.Equal(t, commands.RecoverResult{Recovered: true, Status: events.StatusDead, Attempt: 1, NextAttempt: 2}, res, "its one attempt lost")
	require.Nil(t, b.fold(t, "remote").Leased())
}
