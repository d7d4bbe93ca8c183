package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/router"
)

// Outcome is how one attempt ended.
type Outcome struct {
	Kind      events.Outcome
	Retryable bool
	Error     string
	ExitCode  int
	Duration  time.Duration
	Response  json.RawMessage // the plugin's response as parsed, when there was one
	// Stdout (kept only when there was no valid response) and Stderr are
	// excerpts of what the plugin wrote (pluginhost.Excerpt); StdoutBytes
	// and StderrBytes, when set, are how much it wrote in all.
	Stdout          string
	StdoutBytes     int64
	Stderr          string
	StderrTruncated bool
	StderrBytes     int64
	StateUpdates    json.RawMessage
	Worker          *events.Worker // who ran the attempt (nil: not recorded)
}

// Complete records the end of a running attempt and everything that
// follows from it, in one transaction: the terminal or retry event, the
// plugin's facts or state, the dedupe release and every routed child job.
type Complete struct {
	JobID   string
	Attempt int
	Outcome Outcome
	// Facts are the plugin manifest's fact_outputs for the job's command.
	Facts []FactRule
	// Routing, if set, routes the plugin's emitted events on success.
	Routing *Routing
	// Children are further jobs a success enqueues, besides the routed ones.
	Children []Enqueue
	// MaxStateBytes caps the plugin state (default 1 MiB).
	MaxStateBytes int
	// Breaker is the plugin's circuit breaker setting (zero: the defaults);
	// only scheduled jobs count (breaker.go).
	Breaker config.CircuitBreaker
	// Jitter returns random(0, base) for the backoff (default math/rand).
	Jitter func(base time.Duration) time.Duration
	Now    time.Time
	// Pipelines moves the job's pipeline run on and starts the runs its
	// events and its end trigger (pipeline_step.go); nil: no triggers.
	Pipelines *Pipelines
	// PipelineJob says the job is a pipeline step, so that prepare decodes
	// its response for the run (a wrong hint costs the decision the decode).
	PipelineJob bool
	// Fence, when set, is the lease of the remote worker that ran the
	// attempt: unless it still holds the job, nothing is applied, the
	// completion is recorded as job.superseded, and CompleteJob returns a
	// *StaleFenceError.
	Fence *Fenced

	dropped  []events.DroppedRoute // set by prepare: what the success records
	messages []events.Message      // set by prepare: what routes to topics publish
	response *response             // set by prepare: the response, if the pipelines read it
}

// CompleteResult says where the job went.
type CompleteResult struct {
	Status      events.Status   // succeeded, queued (a retry), dead or canceled
	Kind        events.Outcome  // the outcome kind recorded (may differ from the one given: state too large)
	Error       string          // the attempt's error as recorded (set by the decision when it rejects the state)
	NextRetryAt time.Time       // for a retry
	Children    []EnqueueResult // one per child (Children, then the routed ones), in order
	// Enqueued are the children as enqueued (Children, then the routed ones).
	Enqueued []Enqueue
	// Unrouted are the types of emitted events no route matched.
	Unrouted []string
	// RoutingError says why a success's events were not routed at all.
	RoutingError error
	// Dropped are the routed children not enqueued (past the depth limit,
	// or their plugin cannot run: Routing.CanRun).
	Dropped []events.DroppedRoute
	// Published are the messages routes to topics published (to:
	// topic:<name>).
	Published []events.Message
	Seqs      []int64
	// stale is set when the completion was recorded as superseded.
	stale *StaleFenceError
}

// CompleteJob appends the end of an attempt. Like the start, it is a
// relaxed append (flushed within ledger.RelaxedSyncDelay, not before it
// returns): a power cut in that window can only lose the outcome, and the
// job then runs again after recovery, which at-least-once delivery allows.
// The worker does not wait for a disk flush per job, and one flush covers
// the outcomes of every worker.
//
// A success's children are routed and prepared (ids, envelopes, encoding)
// on the caller's goroutine before the decision, so the single writer pays
// for none of that JSON work. Events that cannot be routed (the core could
// not make their ids or envelopes) route nothing; the success is recorded
// all the same and RoutingError says why.
func CompleteJob(ctx context.Context, l *ledger.Ledger, cmd Complete) (CompleteResult, error) {
	routing := cmd.prepare()
	var res CompleteResult
	seqs, err := l.Decide(ctx, ledger.Relaxed, cmd.decision(&res))
	return cmd.answer(res, seqs, routing, err)
}

// decision is the completion as the ledger runs it; it fills in res.
func (cmd Complete) decision(res *CompleteResult) func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
	return func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		evs, r, err := cmd.decide(tx)
		*res = r
		return evs, err
	}
}

// answer is what CompleteJob returns once the ledger has answered.
func (cmd Complete) answer(res CompleteResult, seqs []int64, routing routed, err error) (CompleteResult, error) {
	if err == nil && res.stale != nil {
		err = res.stale
	}
	if err != nil {
		return CompleteResult{}, fmt.Errorf("complete job: %w", err)
	}
	res.Seqs = seqs
	if res.Status == events.StatusSucceeded {
		res.Enqueued, res.Unrouted, res.RoutingError, res.Dropped = cmd.Children, routing.unrouted, routing.err, routing.dropped
	}
	return res, nil
}

func (cmd Complete) decide(tx *ledger.Tx) ([]ledger.NewEvent, CompleteResult, error) {
	var res CompleteResult
	j, err := LoadJob(tx, cmd.JobID)
	if err != nil {
		return nil, res, err
	}
	if cmd.Fence != nil {
		if superseded, stale := cmd.Fence.checkFence(j, events.RefusedComplete, cmd.Outcome.Kind); stale != nil {
			res.stale = stale
			return superseded, res, nil
		}
	}
	if j.Status != events.StatusRunning && j.Status != events.StatusCancelRequested {
		return nil, res, &TransitionError{JobID: j.JobID, Status: j.Status, Action: "complete an attempt"}
	}
	if r := cmd.Routing; r != nil && (r.Plugin != j.Plugin || r.DedupeKey != j.DedupeKey || r.Depth != j.Depth) {
		return nil, res, fmt.Errorf("%w: routing given for plugin %q, key %q, depth %d; job %s is of plugin %q, key %q, depth %d",
			ErrInvalidCommand, r.Plugin, r.DedupeKey, r.Depth, j.JobID, j.Plugin, j.DedupeKey, j.Depth)
	}
	if j.Attempt != cmd.Attempt {
		return nil, res, &TransitionError{JobID: j.JobID, Status: j.Status, Attempt: j.Attempt, Action: fmt.Sprintf("complete attempt %d", cmd.Attempt)}
	}
	out := cmd.Outcome
	var stateEvs []ledger.NewEvent
	if out.Kind == events.OutcomeOK {
		stateEvs, err = cmd.stateEvents(tx, j)
		var se *stateError
		switch {
		case errors.As(err, &se):
			// The plugin's output is at fault: the attempt fails.
			out.Kind, out.Retryable, out.Error = se.kind, true, se.msg
		case err != nil:
			return nil, res, err // the ledger is: nothing is appended
		}
	}
	ended := events.AttemptEnded{
		Attempt: j.Attempt, Error: out.Error, Kind: out.Kind, Retryable: out.Retryable, ExitCode: out.ExitCode,
		DurationMS: out.Duration.Milliseconds(), Response: out.Response, Stdout: out.Stdout, StdoutBytes: out.StdoutBytes,
		Stderr: out.Stderr, StderrTruncated: out.StderrTruncated, StderrBytes: out.StderrBytes, Worker: out.Worker,
	}
	res.Kind, res.Error = out.Kind, out.Error
	var evs []ledger.NewEvent
	switch {
	case out.Kind == events.OutcomeOK:
		ended.Retryable, ended.DroppedRoutes, ended.ResultRefs = false, cmd.dropped, j.ResultRefs()
		evs = append(evs, j.next(events.JobSucceeded, ended, "", events.ActorDispatcher))
		evs = append(evs, stateEvs...)
		evs = append(evs, cmd.release(j, events.StatusSucceeded)...)
		res.Status = events.StatusSucceeded
		reserved := reservations{}
		if j.DedupeKey != "" {
			// A child routed back to this job's own plugin, command and key
			// is a duplicate of the success being recorded.
			reserved[events.DedupeStream(j.Plugin, j.Command, j.DedupeKey)] = pendingKey{jobID: j.JobID, succeeded: true}
		}
		for _, child := range cmd.Children {
			child.Correlation = j.Correlation // the rest is prepare's
			childEvs, cres, err := child.decide(tx, reserved)
			if err != nil {
				return nil, res, fmt.Errorf("route to %s %s: %w", child.Plugin, child.Command, err)
			}
			evs = append(evs, childEvs...)
			res.Children = append(res.Children, cres)
		}
		for _, m := range cmd.messages {
			var listeners *TopicListeners
			if cmd.Pipelines != nil && cmd.Routing != nil {
				listeners = &TopicListeners{Pipelines: cmd.Pipelines, CanRun: cmd.Routing.CanRun}
			}
			msgEvs, msg, err := publishIn(tx, m, events.ActorRoute, listeners)
			if err != nil {
				return nil, res, fmt.Errorf("route to topic %s: %w", m.Topic, err)
			}
			evs = append(evs, msgEvs...)
			res.Published = append(res.Published, msg)
		}
	case out.Kind == events.OutcomeCanceled || j.Status == events.StatusCancelRequested:
		// Stopped by the cancel, or it failed while a cancel was pending:
		// either way the cancel is what the job's end records.
		reason := out.Error
		if out.Kind != events.OutcomeCanceled {
			evs = append(evs, j.next(failedType(out.Kind), ended, "", events.ActorDispatcher))
			reason = "canceled (its last attempt failed: " + out.Error + ")"
		}
		evs = append(evs, j.next(events.JobCanceled, events.Canceled{Attempt: j.Attempt, Reason: reason, ResultRefs: j.ResultRefs()}, "", events.ActorDispatcher))
		evs = append(evs, cmd.release(j, events.StatusCanceled)...)
		res.Status = events.StatusCanceled
	case out.Kind == events.OutcomeInterrupted:
		evs = append(evs, j.next(events.JobFailed, ended, "", events.ActorDispatcher))
		res.NextRetryAt = cmd.Now
		evs = append(evs, j.next(events.JobRetryScheduled, events.RetryScheduled{
			Attempt: j.Attempt + 1, NextRetryAt: Time(cmd.Now), MaxAttempts: j.MaxAttempts + 1,
		}, "", events.ActorDispatcher))
		res.Status = events.StatusQueued
	default:
		evs = append(evs, j.next(failedType(out.Kind), ended, "", events.ActorDispatcher))
		if out.Retryable && j.Attempt < j.MaxAttempts {
			delay := cmd.backoff(j)
			res.NextRetryAt = cmd.Now.Add(delay)
			evs = append(evs, j.next(events.JobRetryScheduled, events.RetryScheduled{
				Attempt: j.Attempt + 1, NextRetryAt: Time(res.NextRetryAt), DelayMS: delay.Milliseconds(),
			}, "", events.ActorDispatcher))
			res.Status = events.StatusQueued
		} else {
			reason := fmt.Sprintf("attempt %d of %d failed: %s", j.Attempt, j.MaxAttempts, out.Error)
			if !out.Retryable {
				reason = fmt.Sprintf("not retryable: %s", out.Error)
			}
			evs = append(evs, j.next(events.JobDead, events.Dead{Attempt: j.Attempt, Reason: reason, ResultRefs: j.ResultRefs()}, "", events.ActorDispatcher))
			evs = append(evs, cmd.release(j, events.StatusDead)...)
			res.Status = events.StatusDead
		}
	}
	if res.Status.Terminal() {
		end := jobEnd{Status: res.Status, Timeout: out.Kind == events.OutcomeTimeout, Error: out.Error, Response: out.Response, Now: cmd.Now}
		if r := cmd.Routing; r != nil && res.Status == events.StatusSucceeded {
			end.Emitted = r.Events
			if end.Emitted == nil {
				end.Emitted = []router.Event{} // known: none
			}
		}
		if res.Status == events.StatusSucceeded && out.Kind == cmd.Outcome.Kind {
			end.parsed = cmd.response // prepared for this outcome
		}
		more, dropped, err := cmd.Pipelines.afterEnd(tx, j, &end)
		if err != nil {
			return nil, res, err
		}
		withDroppedHooks(evs, j.JobID, dropped)
		evs = append(evs, more...)
	}
	breaker, err := breakerEvents(tx, j, res.Status, out.Error, cmd.Breaker, cmd.Now)
	if err != nil {
		return nil, res, err
	}
	return append(evs, breaker...), res, nil
}

// failedType is the event recording a failed attempt of this kind.
func failedType(kind events.Outcome) string {
	if kind == events.OutcomeTimeout {
		return events.JobTimedOut
	}
	return events.JobFailed
}

// MaxBackoff caps a retry delay, so a large max_attempts cannot overflow it.
const MaxBackoff = 24 * time.Hour

// backoff is base·2^(attempt−1) + random(0, base) (spec §5.7), at most MaxBackoff.
func (cmd Complete) backoff(j *Job) time.Duration {
	base := time.Duration(j.BackoffBaseMS) * time.Millisecond
	jitter := cmd.Jitter
	if jitter == nil {
		jitter = func(b time.Duration) time.Duration {
			if b <= 0 {
				return 0
			}
			return rand.N(b)
		}
	}
	delay := base
	for range j.Attempt - 1 {
		if delay >= MaxBackoff {
			break
		}
		delay *= 2
	}
	return min(delay+jitter(base), MaxBackoff)
}

// release frees the job's dedupe key once it is terminal.
func (cmd Complete) release(j *Job, status events.Status) []ledger.NewEvent {
	return releaseKey(j, status, cmd.Now, events.ActorDispatcher)
}

func releaseKey(j *Job, status events.Status, now time.Time, actor events.Actor) []ledger.NewEvent {
	if j.DedupeKey == "" {
		return nil
	}
	return []ledger.NewEvent{{
		Stream:          events.DedupeStream(j.Plugin, j.Command, j.DedupeKey),
		ExpectedVersion: ledger.AnyVersion, // decided inside the write transaction
		Type:            events.DedupeReleased,
		Data:            events.DedupeReleasedData{JobID: j.JobID, Status: status, CompletedAt: Time(now)},
		Meta:            ledger.Meta{CorrelationID: j.Correlation, Actor: actor},
	}}
}
