package commands_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

const jobID = "job-1"

var jobStreamName = events.JobStream(jobID)

// The given states of the state machine table, each a job history.
var givenStates = map[string]func() *jobStream{
	"queued":            func() *jobStream { return job(jobID) },
	"queued for retry":  func() *jobStream { return job(jobID).started(1).failed(1, "boom").retry(2, at(time.Minute)) },
	"running":           func() *jobStream { return job(jobID).started(1) },
	"running attempt 2": runningAttempt2,
	"cancel_requested":  func() *jobStream { return job(jobID).started(1).cancelRequested(1) },
	"succeeded":         func() *jobStream { return job(jobID).started(1).succeeded(1) },
	"dead":              func() *jobStream { return job(jobID).started(1).failed(1, "boom").dead(1, "not retryable: boom") },
	"canceled":          func() *jobStream { return job(jobID).canceled(1) },
}

func runningAttempt2() *jobStream {
	return job(jobID).started(1).failed(1, "boom").retry(2, at(-time.Minute)).started(2)
}

// when is one command against job-1.
type when func(b *testBundle) error

func start(at time.Time) when {
	return func(b *testBundle) error {
		_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Timeout: time.Minute, PID: 42, Now: at})
		return err
	}
}

// fixedJitter makes the backoff deterministic.
func fixedJitter(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

func complete(attempt int, out commands.Outcome) when {
	return func(b *testBundle) error {
		_, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: attempt, Outcome: out,
			Jitter: fixedJitter(5 * time.Second), Now: now})
		return err
	}
}

func cancel(b *testBundle) error {
	_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: jobID, Reason: "stop it", Actor: events.ActorAPI, Now: now})
	return err
}

func recoverJob(b *testBundle) error {
	_, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: jobID, Now: now})
	return err
}

var (
	outOK       = commands.Outcome{Kind: events.OutcomeOK, Duration: 2 * time.Second}
	outFailed   = commands.Outcome{Kind: events.OutcomeError, Retryable: true, Error: "boom", ExitCode: 1, Duration: 1500 * time.Millisecond}
	outTimeout  = commands.Outcome{Kind: events.OutcomeTimeout, Retryable: true, Error: "timed out", ExitCode: -1, Duration: time.Minute}
	outCanceled = commands.Outcome{Kind: events.OutcomeCanceled, Error: "canceled by cli"}
)

// Expected event data, as JSON.
const (
	dataStarted1      = `{"attempt":1,"deadline_at":"2026-03-01T12:01:00Z","pid":42}`
	dataSucceeded1    = `{"attempt":1,"kind":"ok","retryable":false,"exit_code":0,"duration_ms":2000}`
	dataFailed1       = `{"attempt":1,"error":"boom","kind":"error","retryable":true,"exit_code":1,"duration_ms":1500}`
	dataTimedOut1     = `{"attempt":1,"error":"timed out","kind":"timeout","retryable":true,"exit_code":-1,"duration_ms":60000}`
	dataRetry2        = `{"attempt":2,"next_retry_at":"2026-03-01T12:00:35Z","delay_ms":35000}` // 30s·2^0 + 5s jitter
	dataCanceledByCLI = `{"attempt":1,"reason":"canceled by cli"}`
	dataStopIt        = `{"attempt":1,"reason":"stop it"}`
	defaultReason     = "the process running it stopped before it finished"
)

func jobEv(version int64, typ, data string) want {
	return want{Stream: jobStreamName, Version: version, Type: typ, Data: data}
}

// TestStateMachine walks every (status × command) pair of spec §3.3: given
// a job history, when one command, then exactly these events on any stream
// (or exactly this error and nothing appended), and the folded status after.
func TestStateMachine(t *testing.T) {
	t.Parallel()
	type row struct {
		given   string
		name    string
		when    when
		want    []want
		err     error         // errors.Is
		msg     string        // the exact error text
		status  events.Status // folded status afterwards
		attempt int           // folded attempt afterwards
	}
	rows := []row{
		// queued
		{given: "queued", name: "start", when: start(now),
			want: []want{jobEv(2, events.JobStarted, dataStarted1)}, status: events.StatusRunning, attempt: 1},
		{given: "queued", name: "complete ok", when: complete(1, outOK),
			err: commands.ErrInvalidTransition, msg: "complete job: job job-1 is queued: cannot complete an attempt", status: events.StatusQueued, attempt: 1},
		{given: "queued", name: "complete failed", when: complete(1, outFailed),
			err: commands.ErrInvalidTransition, msg: "complete job: job job-1 is queued: cannot complete an attempt", status: events.StatusQueued, attempt: 1},
		{given: "queued", name: "cancel", when: cancel,
			want: []want{jobEv(2, events.JobCanceled, dataStopIt)}, status: events.StatusCanceled, attempt: 1},
		{given: "queued", name: "recover", when: recoverJob, status: events.StatusQueued, attempt: 1},

		// queued, waiting for its retry at now+1m
		{given: "queued for retry", name: "start before it is due", when: start(now),
			err: commands.ErrNotDue, msg: "start job: job is not due yet: job job-1 retries at 2026-03-01T12:01:00Z", status: events.StatusQueued, attempt: 2},
		{given: "queued for retry", name: "start exactly when due", when: start(now.Add(time.Minute)),
			want: []want{jobEv(5, events.JobStarted, `{"attempt":2,"deadline_at":"2026-03-01T12:02:00Z","pid":42}`)}, status: events.StatusRunning, attempt: 2},
		{given: "queued for retry", name: "start past due", when: start(now.Add(time.Hour)),
			want: []want{jobEv(5, events.JobStarted, `{"attempt":2,"deadline_at":"2026-03-01T13:01:00Z","pid":42}`)}, status: events.StatusRunning, attempt: 2},
		{given: "queued for retry", name: "cancel", when: cancel,
			want: []want{jobEv(5, events.JobCanceled, `{"attempt":2,"reason":"stop it"}`)}, status: events.StatusCanceled, attempt: 2},

		// running
		{given: "running", name: "start again", when: start(now),
			err: commands.ErrInvalidTransition, msg: "start job: job job-1 is running: cannot start", status: events.StatusRunning, attempt: 1},
		{given: "running", name: "complete ok", when: complete(1, outOK),
			want: []want{jobEv(3, events.JobSucceeded, dataSucceeded1)}, status: events.StatusSucceeded, attempt: 1},
		{given: "running", name: "complete failed", when: complete(1, outFailed),
			want: []want{jobEv(3, events.JobFailed, dataFailed1), jobEv(4, events.JobRetryScheduled, dataRetry2)}, status: events.StatusQueued, attempt: 2},
		{given: "running", name: "complete timed out", when: complete(1, outTimeout),
			want: []want{jobEv(3, events.JobTimedOut, dataTimedOut1), jobEv(4, events.JobRetryScheduled, dataRetry2)}, status: events.StatusQueued, attempt: 2},
		{given: "running", name: "complete canceled", when: complete(1, outCanceled),
			want: []want{jobEv(3, events.JobCanceled, dataCanceledByCLI)}, status: events.StatusCanceled, attempt: 1},
		{given: "running", name: "complete a stale attempt", when: complete(0, outOK),
			err: commands.ErrInvalidTransition, msg: "complete job: job job-1 is running on attempt 1: cannot complete attempt 0", status: events.StatusRunning, attempt: 1},
		{given: "running", name: "complete a future attempt", when: complete(2, outOK),
			err: commands.ErrInvalidTransition, msg: "complete job: job job-1 is running on attempt 1: cannot complete attempt 2", status: events.StatusRunning, attempt: 1},
		{given: "running", name: "cancel", when: cancel,
			want: []want{jobEv(3, events.JobCancelRequested, dataStopIt)}, status: events.StatusCancelRequested, attempt: 1},
		{given: "running", name: "recover", when: recoverJob,
			want:   []want{jobEv(3, events.JobRecovered, `{"attempt":1,"next_attempt":2,"requeued":true,"reason":"`+defaultReason+`"}`)},
			status: events.StatusQueued, attempt: 2},

		// running its second attempt
		{given: "running attempt 2", name: "complete the stale attempt 1", when: complete(1, outOK),
			err: commands.ErrInvalidTransition, msg: "complete job: job job-1 is running on attempt 2: cannot complete attempt 1", status: events.StatusRunning, attempt: 2},
		{given: "running attempt 2", name: "complete failed", when: complete(2, outFailed),
			want: []want{
				jobEv(6, events.JobFailed, `{"attempt":2,"error":"boom","kind":"error","retryable":true,"exit_code":1,"duration_ms":1500}`),
				jobEv(7, events.JobRetryScheduled, `{"attempt":3,"next_retry_at":"2026-03-01T12:01:05Z","delay_ms":65000}`), // 30s·2^1 + 5s
			}, status: events.StatusQueued, attempt: 3},

		// cancel_requested
		{given: "cancel_requested", name: "start", when: start(now),
			err: commands.ErrInvalidTransition, msg: "start job: job job-1 is cancel_requested: cannot start", status: events.StatusCancelRequested, attempt: 1},
		{given: "cancel_requested", name: "complete canceled", when: complete(1, outCanceled),
			want: []want{jobEv(4, events.JobCanceled, dataCanceledByCLI)}, status: events.StatusCanceled, attempt: 1},
		{given: "cancel_requested", name: "complete failed: canceled, no retry", when: complete(1, outFailed),
			want:   []want{jobEv(4, events.JobFailed, dataFailed1), jobEv(5, events.JobCanceled, `{"attempt":1,"reason":"canceled (its last attempt failed: boom)"}`)},
			status: events.StatusCanceled, attempt: 1},
		{given: "cancel_requested", name: "complete timed out: canceled, no retry", when: complete(1, outTimeout),
			want:   []want{jobEv(4, events.JobTimedOut, dataTimedOut1), jobEv(5, events.JobCanceled, `{"attempt":1,"reason":"canceled (its last attempt failed: timed out)"}`)},
			status: events.StatusCanceled, attempt: 1},
		{given: "cancel_requested", name: "complete ok: it finished first", when: complete(1, outOK),
			want: []want{jobEv(4, events.JobSucceeded, dataSucceeded1)}, status: events.StatusSucceeded, attempt: 1},
		{given: "cancel_requested", name: "cancel again is a no-op", when: cancel, status: events.StatusCancelRequested, attempt: 1},
		{given: "cancel_requested", name: "recover", when: recoverJob,
			want:   []want{jobEv(4, events.JobCanceled, `{"attempt":1,"reason":"cancel requested; `+defaultReason+`"}`)},
			status: events.StatusCanceled, attempt: 1},
	}
	// Terminal states: every command but recover errors; recover does nothing.
	for _, st := range []events.Status{events.StatusSucceeded, events.StatusDead, events.StatusCanceled} {
		transition := func(cmd, action string) string {
			return fmt.Sprintf("%s job: job job-1 is %s: cannot %s", cmd, st, action)
		}
		rows = append(rows,
			row{given: string(st), name: "start", when: start(now.Add(time.Hour)), err: commands.ErrInvalidTransition, msg: transition("start", "start"), status: st, attempt: 1},
			row{given: string(st), name: "complete ok", when: complete(1, outOK), err: commands.ErrInvalidTransition, msg: transition("complete", "complete an attempt"), status: st, attempt: 1},
			row{given: string(st), name: "complete failed", when: complete(1, outFailed), err: commands.ErrInvalidTransition, msg: transition("complete", "complete an attempt"), status: st, attempt: 1},
			row{given: string(st), name: "complete canceled", when: complete(1, outCanceled), err: commands.ErrInvalidTransition, msg: transition("complete", "complete an attempt"), status: st, attempt: 1},
			row{given: string(st), name: "cancel", when: cancel, err: commands.ErrInvalidTransition, msg: transition("cancel", "cancel"), status: st, attempt: 1},
			row{given: string(st), name: "recover", when: recoverJob, status: st, attempt: 1},
		)
	}

	for _, tc := range rows {
		t.Run(tc.given+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.given(t, givenStates[tc.given]().events()...)
			mark := b.mark(t)

			err := tc.when(b)

			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.EqualError(t, err, tc.msg)
				if errors.Is(tc.err, commands.ErrInvalidTransition) {
					var te *commands.TransitionError
					require.ErrorAs(t, err, &te)
					require.Equal(t, jobID, te.JobID)
				}
			} else {
				require.NoError(t, err)
			}
			requireEvents(t, tc.want, b.since(t, mark))
			j := b.fold(t, jobID)
			require.Equal(t, tc.status, j.Status, "status")
			require.Equal(t, tc.attempt, j.Attempt, "attempt")
		})
	}
}

func TestCommandsOnAMissingJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, w := range map[string]when{
		"start": start(now), "complete": complete(1, outOK), "cancel": cancel, "recover": recoverJob,
	} {
		err := w(b)
		require.ErrorIs(t, err, commands.ErrJobNotFound, name)
		require.EqualError(t, err, name+" job: job not found: job-1")
	}
	require.Empty(t, b.since(t, 0))
}

// TestBackoff drives one job through all its attempts: base 30s, jitter
// fixed at 7s, the retry delays are 37s, 67s, 127s (spec §5.7), the
// last failure is dead, and the dedupe key is released then.
func TestBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job(jobID, withKey("k")).events()...)
	var bases []time.Duration
	jitter := func(base time.Duration) time.Duration {
		bases = append(bases, base)
		return 7 * time.Second
	}

	clock := now
	steps := []struct {
		attempt int
		delay   time.Duration
	}{{1, 37 * time.Second}, {2, 67 * time.Second}, {3, 127 * time.Second}}
	for _, s := range steps {
		started, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Timeout: time.Minute, Now: clock})
		require.NoError(t, err)
		require.Equal(t, s.attempt, started.Attempt)
		require.Equal(t, events.StatusRunning, started.Status)

		mark := b.mark(t)
		res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: s.attempt, Outcome: outFailed, Jitter: jitter, Now: clock})
		require.NoError(t, err)
		require.Equal(t, events.StatusQueued, res.Status)
		require.Equal(t, clock.Add(s.delay), res.NextRetryAt)
		evs := b.since(t, mark)
		require.Len(t, evs, 2)
		require.Equal(t, events.JobRetryScheduled, evs[1].Type)
		require.JSONEq(t, fmt.Sprintf(`{"attempt":%d,"next_retry_at":%q,"delay_ms":%d}`,
			s.attempt+1, commands.Time(clock.Add(s.delay)), s.delay.Milliseconds()), string(evs[1].Data))

		j := b.fold(t, jobID)
		require.Equal(t, s.attempt+1, j.Attempt)
		require.Equal(t, "boom", j.LastError)
		require.Equal(t, clock.Add(s.delay), j.NextRetryAt)

		// Not due a nanosecond before; due at the time.
		_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Now: clock.Add(s.delay - time.Nanosecond)})
		require.ErrorIs(t, err, commands.ErrNotDue)
		clock = clock.Add(s.delay)
	}
	require.Equal(t, []time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second}, bases, "jitter gets random(0, base)")

	_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Now: clock})
	require.NoError(t, err)
	mark := b.mark(t)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: 4, Outcome: outFailed, Jitter: jitter, Now: clock})
	require.NoError(t, err)
	require.Equal(t, commands.CompleteResult{Status: events.StatusDead, Kind: events.OutcomeError, Error: "boom", Seqs: []int64{mark + 1, mark + 2, mark + 3}}, res)
	requireEvents(t, []want{
		jobEv(12, events.JobFailed, `{"attempt":4,"error":"boom","kind":"error","retryable":true,"exit_code":1,"duration_ms":1500}`),
		jobEv(13, events.JobDead, `{"attempt":4,"reason":"attempt 4 of 4 failed: boom"}`),
		{Stream: events.DedupeStream("echo", "poll", "k"), Version: 2, Type: events.DedupeReleased,
			Data: fmt.Sprintf(`{"job_id":"job-1","status":"dead","completed_at":%q}`, commands.Time(clock))},
	}, b.since(t, mark))
	require.Len(t, bases, 3, "no backoff for the last attempt")

	j := b.fold(t, jobID)
	require.Equal(t, events.StatusDead, j.Status)
	require.Equal(t, 4, j.Attempt)
	require.Equal(t, "boom", j.LastError)
}

func TestDefaultJitterIsWithinBase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job(jobID, withMaxAttempts(100)).started(1).events()...)
	for attempt := 1; attempt <= 20; attempt++ {
		res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: attempt, Outcome: outFailed, Now: now})
		require.NoError(t, err)
		delay := res.NextRetryAt.Sub(now)
		base := min(30*time.Second<<(attempt-1), commands.MaxBackoff)
		require.GreaterOrEqual(t, delay, base, "attempt %d", attempt)
		require.LessOrEqual(t, delay, min(base+30*time.Second-time.Nanosecond, commands.MaxBackoff), "attempt %d", attempt)
		_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, Now: res.NextRetryAt})
		require.NoError(t, err)
	}
}

// TestNotRetryable: a plugin that exits 78 (EX_CONFIG) or says retry:false
// is dead on its first attempt, whatever max_attempts says.
func TestNotRetryable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job(jobID, withKey("k")).started(1).events()...)
	mark := b.mark(t)

	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: jobID, Attempt: 1, Now: now,
		Jitter:  func(time.Duration) time.Duration { panic("no backoff for a job that is not retried") },
		Outcome: commands.Outcome{Kind: events.OutcomeError, Retryable: false, Error: "bad config", ExitCode: 78, Stderr: "missing token"}})

	require.NoError(t, err)
	require.Equal(t, events.StatusDead, res.Status)
	require.True(t, res.NextRetryAt.IsZero())
	requireEvents(t, []want{
		jobEv(3, events.JobFailed, `{"attempt":1,"error":"bad config","kind":"error","retryable":false,"exit_code":78,"duration_ms":0,"stderr":"missing token"}`),
		jobEv(4, events.JobDead, `{"attempt":1,"reason":"not retryable: bad config"}`),
		{Stream: events.DedupeStream("echo", "poll", "k"), Version: 2, Type: events.DedupeReleased,
			Data: `{"job_id":"job-1","status":"dead","completed_at":"2026-03-01T12:00:00Z"}`},
	}, b.since(t, mark))
	j := b.fold(t, jobID)
	require.Equal(t, events.StatusDead, j.Status)
	require.Equal(t, 1, j.Attempt)
	require.Equal(t, "bad config", j.LastError)
}

// TestStartOnlyOnce: many workers race to start one queued job; the
// expected version lets exactly one in.
func TestStartOnlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job(jobID).events()...)
	const workers = 20
	errs := make(chan error, workers)
	for i := range workers {
		go func() {
			_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobID, PID: i, Now: now})
			errs <- err
		}()
	}
	var ok int
	for range workers {
		if err := <-errs; err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, commands.ErrInvalidTransition)
		}
	}
	require.Equal(t, 1, ok)
	evs, err := b.l.ReadStream(b.ctx, jobStreamName)
	require.NoError(t, err)
	require.Len(t, evs, 2)
}

// TestEventMeta: events carry the job tree's correlation and who acted.
func TestEventMeta(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job(jobID).events()...)
	require.NoError(t, cancel(b))
	evs, err := b.l.ReadStream(b.ctx, jobStreamName)
	require.NoError(t, err)
	require.JSONEq(t, `{"correlation_id":"job-1","actor":"api"}`, string(evs[1].Meta))
}
