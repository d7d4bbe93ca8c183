package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/router"
	"github.com/ductile/ductile/views"
)

// Attempt is how one attempt of a job ended, as the worker that ran it
// reports it: what Complete records. It is plain data (JSON too), so that
// a completion sent by a worker on another machine takes the same path as
// a local one; a worker in this process adds what it already holds
// (Local), which spares the Engine reading and decoding it again.
type Attempt struct {
	JobID   string        `json:"job_id"`
	Attempt int           `json:"attempt"`
	Worker  events.Worker `json:"worker"`
	// Kind is how the attempt ended (ok, error, protocol_error, timeout,
	// canceled, interrupted…); Retryable says a failure may be retried, and
	// Error is its message.
	Kind      events.Outcome `json:"kind"`
	Retryable bool           `json:"retryable,omitempty"`
	Error     string         `json:"error,omitempty"`
	ExitCode  int            `json:"exit_code"` // -1: killed by a signal, or never started
	Duration  time.Duration  `json:"duration_ns"`
	// Response is the plugin's response as it wrote it (one JSON object,
	// trimmed), when it wrote a valid one.
	Response json.RawMessage `json:"response,omitempty"`
	// Stdout (kept only without a valid Response) and Stderr are excerpts
	// of what the plugin wrote (pluginhost.Excerpt); StdoutBytes and
	// StderrBytes, when set, are how much it wrote in all.
	Stdout          string `json:"stdout,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes,omitempty"`
	Stderr          string `json:"stderr,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	StderrBytes     int64  `json:"stderr_bytes,omitempty"`
	// EndedAt is when the attempt ended, the completion's time (zero: now).
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Fence, when set, is the lease a remote worker ran the attempt under
	// (CompleteRemote): a stale one records job.superseded and applies
	// nothing (a *StaleFenceError).
	Fence int64 `json:"fence,omitempty"`

	Local *Local `json:"-"`
}

// Local is what a worker of this process already holds of its attempt.
// Every field is optional: Complete reads or decodes what is missing.
type Local struct {
	// Job is the job as its start recorded it (commands.Started).
	Job *commands.Job
	// Response is Attempt.Response, decoded.
	Response *pluginhost.Response
	// StartedWith is the Engine the job's start was claimed with: a
	// success's facts follow the manifest the plugin ran with, while its
	// routes, breaker and pipelines are the completing Engine's (a reload
	// changes them at once). Nil: the completing Engine.
	StartedWith *Engine
	// Log is where the completion logs (nil: slog.Default(), with the
	// job's id, plugin and command).
	Log *slog.Logger
	// Next, if set, is recorded in the completion's commit.
	Next *Handoff
}

// Handoff is the start of the job a worker's slot went to once its plugin
// exited, recorded with the worker's completion in one commit
// (commands.HandOff).
type Handoff struct {
	Start commands.Start
	// Answer is given the start's answer, whether the completion lands or
	// not.
	Answer func(commands.Started, error)
}

// Completion is an attempt's completion as recorded: where its job went.
type Completion struct {
	commands.CompleteResult
	// Outcome is the outcome recorded: the attempt's, or the attempt failed
	// without the plugin's output if the ledger refused that
	// (commands.Complete.Refused).
	Outcome commands.Outcome
}

// Complete records how an attempt ended and everything that follows from
// it in one append (commands.CompleteJob): the job's retry or end, its
// plugin's state or facts, the jobs its emitted events route to (none for
// a replay, which is one step), the circuit breaker, the pipeline run it is
// a step of. An outcome the ledger cannot take for now (busy, full…) is
// tried again with backoff until ctx ends; one it refuses for what it holds
// is recorded once as the attempt failed without the plugin's output. An
// error says the outcome was not recorded: the job has moved on
// (commands.ErrInvalidTransition), the ledger is closed, or ctx ended (each
// logged here); or the job could not be read, or a response not decoded
// (commands.ErrInvalidCommand), when the attempt came without Local.
func (e *Engine) Complete(ctx context.Context, a Attempt) (Completion, error) {
	local := a.Local
	if local == nil {
		local = &Local{}
	}
	job := local.Job
	if job == nil {
		var err error
		if job, err = views.JobState(ctx, e.ledger, a.JobID); err != nil {
			return Completion{}, fmt.Errorf("complete job %s: %w", a.JobID, err)
		}
	}
	log := local.Log
	if log == nil {
		log = slog.Default().With("job_id", a.JobID, "plugin", job.Plugin, "command", job.Command)
	}
	response := local.Response
	if response == nil && len(a.Response) > 0 {
		r, err := pluginhost.ParseResponse(a.Response)
		if err != nil {
			return Completion{}, fmt.Errorf("%w: complete job %s: its response: %v", commands.ErrInvalidCommand, a.JobID, err)
		}
		response = r
	}
	startedWith := local.StartedWith
	if startedWith == nil {
		startedWith = e
	}
	cmd := e.completion(a, job, response, startedWith)
	cmd, res, err := e.record(ctx, cmd, local.Next, log)
	if err != nil {
		return Completion{}, staleFence(err)
	}
	logOutcome(log, a.Attempt, cmd.Outcome, res)
	return Completion{CompleteResult: res, Outcome: cmd.Outcome}, nil
}

// completion is the completion command of attempt a of job, whose plugin
// responded response (nil: no valid response).
func (e *Engine) completion(a Attempt, job *commands.Job, response *pluginhost.Response, startedWith *Engine) commands.Complete {
	out := commands.Outcome{
		Kind: a.Kind, Retryable: a.Retryable, Error: a.Error, ExitCode: a.ExitCode, Duration: a.Duration,
		Response: a.Response, Stdout: a.Stdout, StdoutBytes: a.StdoutBytes,
		Stderr: a.Stderr, StderrTruncated: a.StderrTruncated, StderrBytes: a.StderrBytes,
	}
	if a.Worker != (events.Worker{}) {
		out.Worker = &a.Worker
	}
	if response != nil {
		out.StateUpdates = response.StateUpdates
	}
	cmd := commands.Complete{JobID: a.JobID, Attempt: a.Attempt, Outcome: out, Now: now(a.EndedAt),
		Breaker: e.config.Plugin(job.Plugin).CircuitBreaker, Pipelines: e.pipelines, PipelineJob: job.Pipeline != nil}
	if a.Fence != 0 {
		cmd.Fence = &commands.Fenced{Worker: a.Worker.Name, Attempt: a.Attempt, Fence: a.Fence}
	}
	if out.Kind == events.OutcomeOK {
		e.addFactsAndRouting(&cmd, startedWith, job, response)
	}
	return cmd
}

// addFactsAndRouting gives a success's completion what the completion
// command decides facts and routed jobs from: the manifest's fact_outputs
// for the command (startedWith's: the manifest the job ran with), and the
// events the plugin emitted with this Engine's routes.
func (e *Engine) addFactsAndRouting(complete *commands.Complete, startedWith *Engine, job *commands.Job, response *pluginhost.Response) {
	if p, ok := startedWith.localPlugin(job.Plugin); ok {
		for _, fo := range p.Manifest.FactOutputsFor(job.Command) {
			complete.Facts = append(complete.Facts, commands.FactRule{FactType: fo.FactType, View: string(fo.CompatibilityView), From: fo.From})
		}
	} else if p, ok := startedWith.remotePlugin(job.Plugin); ok {
		// Not installed here: the manifest as its workers registered it.
		for _, fo := range p.FactOutputs {
			if fo.Command == job.Command {
				view := fo.CompatibilityView
				if view == "" {
					view = string(pluginhost.MirrorObject)
				}
				complete.Facts = append(complete.Facts, commands.FactRule{FactType: fo.FactType, View: view, From: fo.From})
			}
		}
	}
	if response == nil || len(response.Events) == 0 || job.ReplayOf != "" {
		return // a replay is one step: what it emits is recorded, not routed
	}
	evs := make([]router.Event, len(response.Events))
	for i, ev := range response.Events {
		evs[i] = router.Event{Type: ev.Type, Payload: ev.Payload, DedupeKey: ev.DedupeKey}
	}
	complete.Routing = &commands.Routing{Config: e.config, Plugin: job.Plugin, DedupeKey: job.DedupeKey, Depth: job.Depth, Events: evs,
		CanRun: e.CannotRun}
}

// record records cmd and, if next is set, next's start, together
// (commands.HandOff): they share a commit. The start's answer goes to
// next.Answer; an outcome that did not land is recorded on its own
// (settle). It returns the completion recorded (cmd, or the refused one).
func (e *Engine) record(ctx context.Context, cmd commands.Complete, next *Handoff, log *slog.Logger) (commands.Complete, commands.CompleteResult, error) {
	write := context.WithoutCancel(ctx) // an outcome in flight lands
	if next == nil {
		res, err := commands.CompleteJob(write, e.ledger, cmd)
		return e.settle(ctx, cmd, res, err, log)
	}
	res := commands.HandOff(write, e.ledger, commands.Handoff{Complete: cmd, Next: next.Start})
	next.Answer(res.Started, res.StartErr)
	return e.settle(ctx, cmd, res.Completed, res.CompleteErr, log)
}

// settle records cmd from a first try's answer (res, err) on, again with
// backoff while the ledger cannot take it for now (busy, full…), until ctx
// ends: the outcome must not be lost. An outcome the ledger refuses for
// what it holds, or a completion that cannot be made of it, is replaced
// once by the attempt failed without the plugin's output
// (commands.Complete.Refused), which ends the job. A transition error means
// an earlier try did land (or the job moved on).
func (e *Engine) settle(ctx context.Context, cmd commands.Complete, res commands.CompleteResult, err error, log *slog.Logger) (commands.Complete, commands.CompleteResult, error) {
	backoff := 100 * time.Millisecond
	for tried := false; ; tried = true {
		if tried {
			res, err = commands.CompleteJob(context.WithoutCancel(ctx), e.ledger, cmd)
		}
		switch {
		case err == nil:
			return cmd, res, nil
		case errors.Is(err, commands.ErrStaleFence):
			log.Warn("a remote worker's completion came with a stale fence: recorded as superseded, not applied", "err", err)
			return cmd, res, err
		case errors.Is(err, commands.ErrInvalidTransition):
			log.Warn("the job's outcome was not recorded: the job has moved on", "err", err)
			return cmd, res, err
		case errors.Is(err, ledger.ErrClosed):
			log.Error("the job's outcome was not recorded: the ledger is closed; recovery will run it again", "err", err)
			return cmd, res, err
		case (commands.ContentRefused(err) || errors.Is(err, commands.ErrInvalidCommand)) && cmd.Outcome.Kind != events.OutcomeRefused:
			// A child the completion cannot enqueue (a route to a plugin with
			// bad retry settings) is ErrInvalidCommand: refused for good, as
			// content the ledger cannot hold is.
			log.Error("the ledger refused the job's outcome; recording the attempt as failed without the plugin's output", "err", err)
			cmd = cmd.Refused(err)
			continue
		}
		log.Error("recording the job's outcome failed; will try again", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			log.Error("gave up recording the job's outcome at shutdown; recovery will run it again")
			return cmd, res, fmt.Errorf("gave up recording the outcome of job %s: %w", cmd.JobID, err)
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// logOutcome logs where the job went.
func logOutcome(log *slog.Logger, attempt int, out commands.Outcome, res commands.CompleteResult) {
	attrs := []any{"attempt", attempt, "duration_ms", out.Duration.Milliseconds(), "status", res.Status}
	switch res.Status {
	case events.StatusSucceeded:
		if res.RoutingError != nil {
			log.Error("routing failed: the job's events made no jobs", "err", res.RoutingError)
		}
		if len(res.Unrouted) > 0 {
			log.Debug("events without a route", "event_types", res.Unrouted)
		}
		for _, d := range res.Dropped {
			if d.Limit == 0 {
				log.Error("routed job dropped: its plugin cannot run", "to", d.Plugin, "to_command", d.Command,
					"event_type", d.EventType, "reason", d.Reason)
				continue
			}
			log.Warn("routed job dropped: the route chain is too deep", "to", d.Plugin, "to_command", d.Command,
				"event_type", d.EventType, "depth", d.Depth, "max_route_depth", d.Limit)
		}
		routed := 0
		for i, c := range res.Children {
			if !c.Deduped {
				routed++
				continue
			}
			child := res.Enqueued[i]
			log.Info("routed job dropped as a duplicate", "to", child.Plugin, "dedupe_key", child.DedupeKey, "existing_job_id", c.ExistingJobID)
		}
		log.Info("job succeeded", append(attrs, "children", routed)...)
	case events.StatusQueued:
		log.Warn("job failed; will retry", append(attrs, "kind", res.Kind, "error", res.Error, "next_retry_at", commands.Time(res.NextRetryAt))...)
	case events.StatusCanceled:
		log.Info("job canceled", attrs...)
	default:
		log.Error("job is dead", append(attrs, "kind", res.Kind, "error", res.Error)...)
	}
}
