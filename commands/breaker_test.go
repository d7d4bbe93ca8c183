package commands_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// breakerSettings are the spec's defaults, spelled out: 3 failures, 30m.
var breakerSettings = config.CircuitBreaker{Enabled: true, Threshold: 3, ResetAfter: 30 * time.Minute}

// runJob enqueues a job of echo poll by by (id given, or assigned), starts
// it and completes its one attempt at t, succeeding or not. A failure is
// not retryable, so the job ends dead.
func (b *testBundle) runJob(t *testing.T, id string, by events.Actor, ok bool, at time.Time) string {
	t.Helper()
	res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{JobID: id, Plugin: "echo", Command: "poll", SubmittedBy: by,
		MaxAttempts: 1, BackoffBase: time.Second, Now: at})
	require.NoError(t, err)
	b.finish(t, res.JobID, ok, at)
	return res.JobID
}

// finish starts a queued job and completes its attempt at t.
func (b *testBundle) finish(t *testing.T, id string, ok bool, at time.Time) commands.CompleteResult {
	t.Helper()
	st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, Now: at})
	require.NoError(t, err)
	out := commands.Outcome{Kind: events.OutcomeOK, Response: json.RawMessage(`{"status":"ok","result":"ok"}`)}
	if !ok {
		out = commands.Outcome{Kind: events.OutcomeError, Error: "upstream 503", ExitCode: 1}
	}
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: id, Attempt: st.Attempt, Outcome: out, Breaker: breakerSettings, Now: at})
	require.NoError(t, err)
	return res
}

// breaker reads the breaker of echo poll.
func (b *testBundle) breaker(t *testing.T) *commands.Breaker {
	t.Helper()
	var out *commands.Breaker
	_, err := b.l.Decide(b.ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		var err error
		out, err = commands.LoadBreaker(tx, "echo", "poll")
		return nil, err
	})
	require.NoError(t, err)
	return out
}

// admit asks the breaker of echo poll to let scheduled job id through at
// t, appending what it decides.
func (b *testBundle) admit(t *testing.T, id string, at time.Time) commands.Admission {
	t.Helper()
	var adm commands.Admission
	_, err := b.l.Decide(b.ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		var evs []ledger.NewEvent
		var err error
		adm, evs, err = commands.AdmitScheduled(tx, "echo", "poll", breakerSettings, id, at)
		return evs, err
	})
	require.NoError(t, err)
	return adm
}

// breakerEvents are the events of echo poll's breaker stream after seq.
func (b *testBundle) breakerEvents(t *testing.T, seq int64) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	for _, ev := range b.since(t, seq) {
		if ev.Stream == events.BreakerStream("echo", "poll") {
			out = append(out, ev)
		}
	}
	return out
}

func TestBreakerOpensAfterExactlyThresholdConsecutiveFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Given two failures, a success, then two more: never three in a row.
	b.runJob(t, "", events.ActorScheduler, false, now)
	b.runJob(t, "", events.ActorScheduler, false, now)
	require.Equal(t, 2, b.breaker(t).Failures)
	mark := b.mark(t)
	ok := b.runJob(t, "", events.ActorScheduler, true, now)
	requireEvents(t, []want{{Stream: "breaker/echo/poll", Version: 3, Type: events.BreakerFailuresCleared,
		Data: fmt.Sprintf(`{"from":"closed","state":"closed","reason":"success","failures":0,"threshold":3,"job_id":%q}`, ok)}},
		b.breakerEvents(t, mark))
	b.runJob(t, "", events.ActorScheduler, false, now)
	second := b.runJob(t, "", events.ActorScheduler, false, now)
	br := b.breaker(t)
	require.Equal(t, events.BreakerStateClosed, br.State)
	require.Equal(t, 2, br.Failures)
	require.Equal(t, second, br.JobID)

	// When the third in a row ends dead, at a known time.
	failAt := now.Add(time.Minute)
	mark = b.mark(t)
	third := b.runJob(t, "", events.ActorScheduler, false, failAt)

	// Then the breaker opens in the completion's own transaction, with a
	// probe time reset_after later.
	evs := b.since(t, mark)
	last := evs[len(evs)-1]
	require.Equal(t, events.BreakerOpened, last.Type)
	require.JSONEq(t, fmt.Sprintf(`{"from":"closed","state":"open","reason":"failure_threshold","failures":3,"threshold":3,
		"job_id":%q,"last_error":"upstream 503","opened_at":%q,"probe_at":%q}`, third, commands.Time(failAt), commands.Time(failAt.Add(30*time.Minute))),
		string(last.Data))
	dead := evs[len(evs)-2]
	require.Equal(t, events.JobDead, dead.Type)
	require.Equal(t, dead.RecordedAt, last.RecordedAt, "recorded by the completion's transaction")
	m, err := last.Metadata()
	require.NoError(t, err)
	require.Equal(t, third, m.CausationID)
}

func TestBreakerHealthySuccessAppendsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark := b.mark(t)
	for range 5 {
		b.runJob(t, "", events.ActorScheduler, true, now)
	}
	require.Empty(t, b.breakerEvents(t, mark))
	require.True(t, b.breaker(t).Healthy())
}

func TestBreakerCooldownSingleProbeAndClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.runJob(t, "", events.ActorScheduler, false, now)
	}
	require.Equal(t, events.BreakerStateOpen, b.breaker(t).State)

	// Before the cooldown: refused, and the reason says why and until when.
	adm := b.admit(t, "early", now.Add(28*time.Minute))
	require.False(t, adm.Allow)
	require.Equal(t, fmt.Sprintf("breaker open since %s after 3 consecutive failures (last: upstream 503); half-open probe at %s",
		commands.Time(now), commands.Time(now.Add(30*time.Minute))), adm.Reason)

	// At the probe time: one probe, named by breaker.half_opened.
	mark := b.mark(t)
	adm = b.admit(t, "probe-1", now.Add(30*time.Minute))
	require.Equal(t, commands.Admission{Allow: true, Probe: true}, adm)
	evs := b.breakerEvents(t, mark)
	require.Len(t, evs, 1)
	require.Equal(t, events.BreakerHalfOpened, evs[0].Type)
	br := b.breaker(t)
	require.Equal(t, events.BreakerStateHalfOpen, br.State)
	require.Equal(t, "probe-1", br.ProbeJobID)
	require.Equal(t, events.BreakerReasonCooldownElapsed, br.Reason)

	// While the probe is queued, and then running, every other firing is refused.
	_, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{JobID: "probe-1", Plugin: "echo", Command: "poll",
		SubmittedBy: events.ActorScheduler, MaxAttempts: 1, BackoffBase: time.Second, Now: now})
	require.NoError(t, err)
	adm = b.admit(t, "other", now.Add(31*time.Minute))
	require.False(t, adm.Allow)
	require.Contains(t, adm.Reason, "probe job probe-1 is queued")

	// The probe succeeds: closed, count cleared.
	mark = b.mark(t)
	b.finish(t, "probe-1", true, now.Add(32*time.Minute))
	evs = b.breakerEvents(t, mark)
	require.Len(t, evs, 1)
	require.Equal(t, events.BreakerClosed, evs[0].Type)
	require.JSONEq(t, `{"from":"half_open","state":"closed","reason":"success","failures":0,"threshold":3,"job_id":"probe-1"}`, string(evs[0].Data))
	require.True(t, b.breaker(t).Healthy())
	require.Equal(t, commands.Admission{Allow: true}, b.admit(t, "after", now.Add(33*time.Minute)))
}

// The breaker opens a few milliseconds after the firing whose job ended
// it: a firing on an interval equal to reset_after comes that much before
// the probe time, and must still be the probe (within min(1m, a tenth of
// reset_after)), not wait a whole interval more.
func TestBreakerProbeToleratesFiringJustBeforeProbeTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.runJob(t, "", events.ActorScheduler, false, now)
	}
	probeAt := now.Add(30 * time.Minute)
	require.False(t, b.admit(t, "too-early", probeAt.Add(-time.Minute-time.Millisecond)).Allow)
	require.Equal(t, commands.Admission{Allow: true, Probe: true}, b.admit(t, "probe-1", probeAt.Add(-5*time.Millisecond)))
	require.Equal(t, "probe-1", b.breaker(t).ProbeJobID)
}

func TestBreakerProbeFailureReopens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.runJob(t, "", events.ActorScheduler, false, now)
	}
	probeAt := now.Add(30 * time.Minute)
	require.True(t, b.admit(t, "probe-1", probeAt).Probe)

	// A scheduled job queued before the breaker opened fails beside the
	// probe: counted, still half-open.
	b.runJob(t, "straggler", events.ActorScheduler, false, probeAt)
	br := b.breaker(t)
	require.Equal(t, events.BreakerStateHalfOpen, br.State)
	require.Equal(t, 4, br.Failures)

	// The probe fails: open again, with a new cooldown from now.
	failAt := probeAt.Add(time.Minute)
	b.runJob(t, "probe-1", events.ActorScheduler, false, failAt)
	br = b.breaker(t)
	require.Equal(t, events.BreakerStateOpen, br.State)
	require.Equal(t, events.BreakerReasonProbeFailed, br.Reason)
	require.Equal(t, 5, br.Failures)
	require.Equal(t, commands.Time(failAt), br.OpenedAt)
	require.Equal(t, commands.Time(failAt.Add(30*time.Minute)), br.ProbeAt)
	require.False(t, b.admit(t, "x", failAt.Add(28*time.Minute)).Allow)
	require.True(t, b.admit(t, "probe-2", failAt.Add(30*time.Minute)).Probe)
}

func TestBreakerProbeThatEndsWithoutVerdictIsReplaced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.runJob(t, "", events.ActorScheduler, false, now)
	}
	probeAt := now.Add(30 * time.Minute)

	// The probe is never enqueued (say, a duplicate): the next firing probes.
	require.True(t, b.admit(t, "ghost", probeAt).Probe)
	require.True(t, b.admit(t, "probe-2", probeAt.Add(time.Minute)).Probe)
	require.Equal(t, events.BreakerReasonProbeEnded, b.breaker(t).Reason)

	// The probe is canceled while queued: the next firing probes.
	_, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{JobID: "probe-2", Plugin: "echo", Command: "poll",
		SubmittedBy: events.ActorScheduler, MaxAttempts: 1, BackoffBase: time.Second, Now: now})
	require.NoError(t, err)
	require.False(t, b.admit(t, "x", probeAt.Add(2*time.Minute)).Allow)
	_, err = commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: "probe-2", Now: now})
	require.NoError(t, err)
	require.True(t, b.admit(t, "probe-3", probeAt.Add(3*time.Minute)).Probe)
	require.Equal(t, "probe-3", b.breaker(t).ProbeJobID)
}

func TestBreakerOnlyCountsScheduledJobsAndNeverBlocksOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark := b.mark(t)
	// Failures of jobs from the CLI, the API, webhooks and routes count for nothing.
	for _, by := range []events.Actor{events.ActorCLI, events.ActorAPI, events.ActorWebhook, events.ActorRoute} {
		for range 3 {
			b.runJob(t, "", by, false, now)
		}
	}
	require.Empty(t, b.breakerEvents(t, mark))
	require.True(t, b.breaker(t).Healthy())

	// With the breaker open, they are still enqueued and run, and their
	// successes neither close it nor touch it.
	for range 3 {
		b.runJob(t, "", events.ActorScheduler, false, now)
	}
	mark = b.mark(t)
	for _, by := range []events.Actor{events.ActorCLI, events.ActorAPI, events.ActorWebhook, events.ActorRoute} {
		id := b.runJob(t, "", by, true, now)
		require.Equal(t, events.StatusSucceeded, b.fold(t, id).Status)
	}
	require.Empty(t, b.breakerEvents(t, mark))
	require.Equal(t, events.BreakerStateOpen, b.breaker(t).State)
}

func TestBreakerCountsJobsNotAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorScheduler,
		MaxAttempts: 4, BackoffBase: time.Second, Now: now})
	require.NoError(t, err)
	mark := b.mark(t)
	at := now
	for attempt := 1; attempt <= 4; attempt++ {
		st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Now: at})
		require.NoError(t, err)
		cres, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: res.JobID, Attempt: st.Attempt, Breaker: breakerSettings, Now: at,
			Outcome: commands.Outcome{Kind: events.OutcomeError, Retryable: true, Error: "flaky"}})
		require.NoError(t, err)
		if attempt < 4 {
			require.Equal(t, events.StatusQueued, cres.Status)
			require.Empty(t, b.breakerEvents(t, mark), "a retry counts nothing")
			at = cres.NextRetryAt
		}
	}
	evs := b.breakerEvents(t, mark)
	require.Len(t, evs, 1)
	require.Equal(t, events.BreakerFailureRecorded, evs[0].Type)
	require.Equal(t, 1, b.breaker(t).Failures)
}

func TestBreakerDisabledCountsNothingAndAdmitsAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	off := config.CircuitBreaker{Enabled: false, Threshold: 1, ResetAfter: time.Minute}
	mark := b.mark(t)
	for range 3 {
		res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorScheduler,
			MaxAttempts: 1, BackoffBase: time.Second, Now: now})
		require.NoError(t, err)
		st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Now: now})
		require.NoError(t, err)
		_, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: res.JobID, Attempt: st.Attempt, Breaker: off, Now: now,
			Outcome: commands.Outcome{Kind: events.OutcomeError, Error: "boom"}})
		require.NoError(t, err)
	}
	require.Empty(t, b.breakerEvents(t, mark))
	_, err := b.l.Decide(b.ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		adm, evs, err := commands.AdmitScheduled(tx, "echo", "poll", off, "j", now)
		require.Equal(t, commands.Admission{Allow: true}, adm)
		return evs, err
	})
	require.NoError(t, err)
}

func TestResetBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// A closed breaker with nothing counted: a no-op.
	res, err := commands.ResetBreaker(b.ctx, b.l, commands.Reset{Plugin: "echo", Command: "poll", Now: now})
	require.NoError(t, err)
	require.False(t, res.Reset)
	require.Zero(t, res.Seq)

	for range 3 {
		b.runJob(t, "", events.ActorScheduler, false, now)
	}
	mark := b.mark(t)
	res, err = commands.ResetBreaker(b.ctx, b.l, commands.Reset{Plugin: "echo", Command: "poll", Actor: "alice", Now: now})
	require.NoError(t, err)
	require.True(t, res.Reset)
	require.Equal(t, events.BreakerStateOpen, res.Before.State)
	requireEvents(t, []want{{Stream: "breaker/echo/poll", Version: 4, Type: events.BreakerReset,
		Data: `{"from":"open","state":"closed","reason":"manual_reset","failures":0,"threshold":3}`,
		Meta: `{"actor":"alice"}`}}, b.breakerEvents(t, mark))
	require.True(t, b.breaker(t).Healthy())
	require.Equal(t, commands.Admission{Allow: true}, b.admit(t, "next", now))

	// Again: nothing to do.
	res, err = commands.ResetBreaker(b.ctx, b.l, commands.Reset{Plugin: "echo", Command: "poll", Now: now})
	require.NoError(t, err)
	require.False(t, res.Reset)
}
