package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
	"unicode/utf8"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/router"
)

// DefaultMaxStateBytes is the size limit of a plugin's state (spec §5.9).
const DefaultMaxStateBytes = 1 << 20

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

// FactRule is a manifest fact_outputs rule for the job's command. A rule
// whose From is empty or "state_updates" records the plugin's
// state_updates as a fact instead of merging them into its state; any
// other From is not recorded by the core.
type FactRule struct {
	FactType string
	View     string // mirror_object
	From     string
}

// Routing is what a success's emitted events become: a child job for every
// config route they match, with the config's defaults for its plugin.
type Routing struct {
	Config *config.Config
	// Plugin and DedupeKey are the job's: routes match on the emitting
	// plugin, and a child without a key of its own takes the job's. They
	// are given because routing is prepared before the job is loaded.
	Plugin    string
	DedupeKey string
	// Depth is the job's own depth: its routed children are one deeper,
	// and one past Config.Service.MaxRouteDepth is dropped.
	Depth  int
	Events []router.Event
	// CanRun says why a routed child's plugin command cannot run now (not
	// loaded, disabled, no such command): such a child is dropped with the
	// reason, not enqueued to fail. nil: every child can.
	CanRun func(plugin, command string) error
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

	dropped  []events.DroppedRoute // set by prepare: what the success records
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
	Seqs    []int64
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
	if err != nil {
		return CompleteResult{}, fmt.Errorf("complete job: %w", err)
	}
	res.Seqs = seqs
	if res.Status == events.StatusSucceeded {
		res.Enqueued, res.Unrouted, res.RoutingError, res.Dropped = cmd.Children, routing.unrouted, routing.err, routing.dropped
	}
	return res, nil
}

// routed is what routing a success's events came to, besides its children.
type routed struct {
	unrouted []string              // event types no route matched
	err      error                 // the events could not be routed
	dropped  []events.DroppedRoute // children past the depth limit, or whose plugin cannot run
}

// prepare routes a success's emitted events into children and fills in
// what every child takes from this completion (time, parent, producer),
// then does their work that needs no transaction (Enqueue.prepare). It
// replaces Children with prepared copies (the slice given is left alone).
// A child that cannot be prepared is left to the decision, which fails the
// completion and says why.
func (cmd *Complete) prepare() (res routed) {
	if cmd.Outcome.Kind != events.OutcomeOK {
		return res // only a success routes its children
	}
	if cmd.Pipelines.wantsResponse(cmd.PipelineJob, cmd.Routing) {
		// Decoded here, on the caller's goroutine, not by the writer.
		r := (&jobEnd{Response: cmd.Outcome.Response}).parse()
		cmd.response = &r
	}
	cmd.Children = slices.Clone(cmd.Children)
	if r := cmd.Routing; r != nil && len(r.Events) > 0 {
		children, unrouted, err := router.Route(r.Config.Routes, r.Plugin, r.DedupeKey, r.Events, cmd.Now)
		res = routed{unrouted: unrouted, err: err}
		if err != nil {
			children = nil
		}
		limit := r.Config.Service.MaxRouteDepth
		if limit <= 0 {
			limit = config.DefaultMaxRouteDepth
		}
		for _, ch := range children {
			if depth := r.Depth + 1; depth > limit {
				res.dropped = append(res.dropped, events.DroppedRoute{Plugin: ch.Plugin, Command: ch.Command, EventType: ch.EventType,
					Depth: depth, Limit: limit, Reason: fmt.Sprintf("depth %d would pass service.max_route_depth (%d): the route may loop", depth, limit)})
				continue
			}
			if r.CanRun != nil {
				if err := r.CanRun(ch.Plugin, ch.Command); err != nil {
					res.dropped = append(res.dropped, events.DroppedRoute{Plugin: ch.Plugin, Command: ch.Command, EventType: ch.EventType,
						Depth: r.Depth + 1, Reason: err.Error()})
					continue
				}
			}
			enq := JobFor(r.Config, ch.Plugin, ch.Command, ByRoute)
			enq.Payload, enq.Event, enq.DedupeKey, enq.SourceEventID, enq.Causation = ch.Payload, ch.Envelope, ch.DedupeKey, ch.EventID, ch.EventID
			enq.Depth = r.Depth + 1
			cmd.Children = append(cmd.Children, enq)
		}
		cmd.dropped = res.dropped
	}
	for i := range cmd.Children {
		child := &cmd.Children[i]
		child.Now, child.ParentJobID = cmd.Now, cmd.JobID
		if child.SubmittedBy == "" {
			child.SubmittedBy = ByRoute
		}
		child.prepare()
	}
	return res
}

func (cmd Complete) decide(tx *ledger.Tx) ([]ledger.NewEvent, CompleteResult, error) {
	var res CompleteResult
	j, err := LoadJob(tx, cmd.JobID)
	if err != nil {
		return nil, res, err
	}
	defer j.forget(tx) // finished or waiting for a retry: its next start folds it
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
		ended.Retryable, ended.DroppedRoutes = false, cmd.dropped
		evs = append(evs, j.next(events.JobSucceeded, ended, "", "dispatcher"))
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
	case out.Kind == events.OutcomeCanceled || j.Status == events.StatusCancelRequested:
		// Stopped by the cancel, or it failed while a cancel was pending:
		// either way the cancel is what the job's end records.
		reason := out.Error
		if out.Kind != events.OutcomeCanceled {
			evs = append(evs, j.next(failedType(out.Kind), ended, "", "dispatcher"))
			reason = "canceled (its last attempt failed: " + out.Error + ")"
		}
		evs = append(evs, j.next(events.JobCanceled, events.Canceled{Attempt: j.Attempt, Reason: reason}, "", "dispatcher"))
		evs = append(evs, cmd.release(j, events.StatusCanceled)...)
		res.Status = events.StatusCanceled
	case out.Kind == events.OutcomeInterrupted:
		evs = append(evs, j.next(events.JobFailed, ended, "", "dispatcher"))
		res.NextRetryAt = cmd.Now
		evs = append(evs, j.next(events.JobRetryScheduled, events.RetryScheduled{
			Attempt: j.Attempt + 1, NextRetryAt: Time(cmd.Now), MaxAttempts: j.MaxAttempts + 1,
		}, "", "dispatcher"))
		res.Status = events.StatusQueued
	default:
		evs = append(evs, j.next(failedType(out.Kind), ended, "", "dispatcher"))
		if out.Retryable && j.Attempt < j.MaxAttempts {
			delay := cmd.backoff(j)
			res.NextRetryAt = cmd.Now.Add(delay)
			evs = append(evs, j.next(events.JobRetryScheduled, events.RetryScheduled{
				Attempt: j.Attempt + 1, NextRetryAt: Time(res.NextRetryAt), DelayMS: delay.Milliseconds(),
			}, "", "dispatcher"))
			res.Status = events.StatusQueued
		} else {
			reason := fmt.Sprintf("attempt %d of %d failed: %s", j.Attempt, j.MaxAttempts, out.Error)
			if !out.Retryable {
				reason = fmt.Sprintf("not retryable: %s", out.Error)
			}
			evs = append(evs, j.next(events.JobDead, events.Dead{Attempt: j.Attempt, Reason: reason}, "", "dispatcher"))
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

// stateFacts are the fact rules that record the plugin's state_updates.
func (cmd Complete) stateFacts() []FactRule {
	var out []FactRule
	for _, rule := range cmd.Facts {
		if rule.From == "" || rule.From == "state_updates" {
			out = append(out, rule)
		}
	}
	return out
}

// Refused is the completion to record instead of cmd once the ledger has
// refused cmd for what it holds (err, for which ContentRefused is true): the
// attempt fails, not retryably, with the ledger's reason, and none of the
// plugin's output (response, stdout, stderr, state, facts, routed jobs) is
// kept, since any of it may be what was refused. The job ends, dead (or
// canceled, if a cancel was pending), instead of staying running while the
// same outcome is refused again and again.
func (cmd Complete) Refused(err error) Complete {
	out := cmd.Outcome
	what := string(out.Kind)
	if out.Error != "" {
		what += ": " + cutError(out.Error, 512)
	}
	return Complete{
		JobID: cmd.JobID, Attempt: cmd.Attempt, MaxStateBytes: cmd.MaxStateBytes, Breaker: cmd.Breaker, Jitter: cmd.Jitter, Now: cmd.Now,
		Pipelines: cmd.Pipelines,
		Outcome: Outcome{
			Kind: events.OutcomeRefused, ExitCode: out.ExitCode, Duration: out.Duration, Worker: out.Worker,
			Error: fmt.Sprintf("the ledger refused to record the attempt's outcome (%s): %v; it is recorded without the plugin's output", what, err),
		},
	}
}

// cutError keeps at most n bytes of s (whole runes), "…" marking a cut.
func cutError(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ContentRefused reports whether err, from recording a completion, is the
// ledger refusing what the completion holds (a constraint such as the
// events table's json_valid CHECK, data it cannot encode, a routed job it
// cannot enqueue), which the same completion would meet again, rather than
// the ledger being unable to write for now (busy, locked, disk full, an I/O
// error, closed, no longer durable) or the job having moved on.
func ContentRefused(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, ErrInvalidTransition),
		errors.Is(err, ledger.ErrClosed),
		errors.Is(err, ledger.ErrNotDurable),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		return false
	}
	switch sqlite.ErrCode(err).ToPrimary() {
	case sqlite.ResultBusy, sqlite.ResultLocked, sqlite.ResultFull, sqlite.ResultIOErr, sqlite.ResultNoMem,
		sqlite.ResultCantOpen, sqlite.ResultProtocol, sqlite.ResultReadOnly, sqlite.ResultInterrupt,
		sqlite.ResultCorrupt, sqlite.ResultNotADB, sqlite.ResultNoLFS, sqlite.ResultPerm, sqlite.ResultAuth,
		sqlite.ResultSchema, sqlite.ResultAbort:
		return false
	}
	return true
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
	return releaseKey(j, status, cmd.Now, "dispatcher")
}

func releaseKey(j *Job, status events.Status, now time.Time, actor string) []ledger.NewEvent {
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

// stateError is a problem with the state a plugin emitted: it fails the
// attempt, unlike an error reading the ledger, which fails the command.
type stateError struct {
	kind events.Outcome
	msg  string
}

func (e *stateError) Error() string { return e.msg }

func tooLarge(limit int) error {
	return &stateError{kind: events.OutcomeStateTooLarge, msg: fmt.Sprintf("state update exceeds the %d byte limit", limit)}
}

// stateEvents turns the plugin's state_updates into facts (when a
// fact_outputs rule matches) or a write-through shallow merge.
func (cmd Complete) stateEvents(tx *ledger.Tx, j *Job) ([]ledger.NewEvent, error) {
	updates := bytes.TrimSpace(cmd.Outcome.StateUpdates)
	if len(updates) == 0 || bytes.Equal(updates, []byte("null")) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(updates, &obj); err != nil {
		return nil, &stateError{kind: events.OutcomeBadState, msg: fmt.Sprintf("state_updates must be a JSON object: %v", err)}
	}
	limit := cmd.MaxStateBytes
	if limit <= 0 {
		limit = DefaultMaxStateBytes
	}
	meta := ledger.Meta{CorrelationID: j.Correlation, CausationID: j.JobID, Actor: j.Plugin}
	stream := events.PluginStream(j.Plugin)
	if facts := cmd.stateFacts(); len(facts) > 0 {
		if len(updates) > limit {
			return nil, tooLarge(limit)
		}
		var evs []ledger.NewEvent
		for _, rule := range facts {
			evs = append(evs, ledger.NewEvent{Stream: stream, ExpectedVersion: ledger.AnyVersion, Type: events.PluginFactRecorded,
				Data: events.FactRecorded{FactType: rule.FactType, JobID: j.JobID, Command: j.Command, Fact: updates, View: rule.View}, Meta: meta})
		}
		return evs, nil
	}
	current, err := currentState(tx, stream)
	if err != nil {
		return nil, err
	}
	for k, v := range obj {
		current[k] = v
	}
	merged, err := json.Marshal(current)
	if err != nil {
		return nil, err
	}
	if len(merged) > limit {
		return nil, tooLarge(limit)
	}
	return []ledger.NewEvent{{Stream: stream, ExpectedVersion: ledger.AnyVersion, Type: events.PluginStateMerged,
		Data: events.StateMerged{JobID: j.JobID, Command: j.Command, Updates: updates, State: merged}, Meta: meta}}, nil
}

// currentState is the plugin's state as its newest event left it, decoded
// for a merge (see storedState).
func currentState(tx *ledger.Tx, stream string) (map[string]json.RawMessage, error) {
	raw, err := storedState(tx, stream)
	if err != nil {
		return nil, err
	}
	state := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &state); err != nil {
		return nil, err
	}
	return state, nil
}

// storedState is the plugin's state as its newest event left it, as stored:
// the state of a plugin.state_merged event or the fact of a
// plugin.fact_recorded event (both JSON objects, as stateEvents writes
// them), and {} when the stream is empty or ends with another event.
func storedState(tx *ledger.Tx, stream string) (json.RawMessage, error) {
	empty := json.RawMessage("{}")
	ev, ok, err := tx.LastEvent(stream)
	if err != nil || !ok {
		return empty, err
	}
	switch ev.Type {
	case events.PluginStateMerged:
		var d events.StateMerged
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		return d.State, nil
	case events.PluginFactRecorded:
		var d events.FactRecorded
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		return d.Fact, nil
	}
	return empty, nil
}
