package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/router"
)

// outcome turns a plugin run into the Outcome to record, and logs what the
// plugin wrote to stderr and its logs.
func (r *runner) outcome(ctx context.Context, res pluginhost.Result, log *slog.Logger) commands.Outcome {
	out := commands.Outcome{
		Kind: res.Kind, Retryable: res.Retryable, Error: res.Err, ExitCode: res.ExitCode,
		Duration: res.Duration, Stderr: string(res.Stderr), StderrTruncated: res.StderrTruncated,
	}
	if res.StderrTruncated {
		out.StderrBytes = res.StderrBytes
	}
	if res.Response != nil {
		// ParseResponse accepted exactly this (one JSON object, trimmed).
		out.Response = json.RawMessage(bytes.TrimSpace(res.Stdout))
		out.StateUpdates = res.Response.StateUpdates
	} else if len(res.Stdout) > 0 {
		// Not a response: what the plugin wrote is kept for diagnosis, an
		// excerpt of it (a flood must not bloat the ledger for ever).
		stdout, cut := pluginhost.Excerpt(res.Stdout, res.StdoutBytes)
		out.Stdout = string(stdout)
		if cut {
			out.StdoutBytes = max(res.StdoutBytes, int64(len(res.Stdout)))
		}
	}
	if res.Kind == events.OutcomeCanceled {
		if errors.Is(context.Cause(ctx), errShutdown) {
			out.Kind, out.Retryable, out.Error = events.OutcomeInterrupted, true, errShutdown.Error()
		} else {
			out.Kind, out.Error = events.OutcomeCanceled, cancelCause(ctx).Error()
		}
	}
	if len(res.Stderr) > 0 {
		log.Info("plugin wrote to stderr", "stderr", tail(string(res.Stderr), 2048), "truncated", res.StderrTruncated)
	}
	if res.Response != nil {
		for _, l := range res.Response.Logs {
			log.Log(ctx, pluginLevel(l.Level), l.Message, "source", "plugin")
		}
	}
	return out
}

// cancelCause is why a canceled run was canceled, as recorded: the cause
// its context was canceled with (RunJob's caller may give one, such as a
// timeout of its own), else a cancel request.
func cancelCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	return errCanceledByUser
}

// addFactsAndRouting gives a success's completion what the completion
// command decides facts and routed jobs from: the manifest's fact_outputs
// for the command, and the events the plugin emitted with the config's
// routes. The facts follow the manifest the job ran with (s); routes are
// the current config's: a reload changes them at once.
func (r *runner) addFactsAndRouting(complete *commands.Complete, s *settings, job *commands.Job, res pluginhost.Result) {
	if p, ok := s.plugins.Get(job.Plugin); ok {
		for _, fo := range p.Manifest.FactOutputsFor(job.Command) {
			complete.Facts = append(complete.Facts, commands.FactRule{FactType: fo.FactType, View: string(fo.CompatibilityView), From: fo.From})
		}
	}
	if res.Response == nil || len(res.Response.Events) == 0 || job.ReplayOf != "" {
		return // a replay is one step: what it emits is recorded, not routed
	}
	evs := make([]router.Event, len(res.Response.Events))
	for i, e := range res.Response.Events {
		evs[i] = router.Event{Type: e.Type, Payload: e.Payload, DedupeKey: e.DedupeKey}
	}
	cur := r.current.Load()
	complete.Routing = &commands.Routing{Config: cur.config, Plugin: job.Plugin, DedupeKey: job.DedupeKey, Depth: job.Depth, Events: evs,
		CanRun: cur.cannotRun}
}

// recordOutcome records an attempt's outcome (complete) and, if next is
// set, the start of the job its slot went to, together (commands.HandOff):
// they share a commit. The start's answer goes to next's worker; an outcome
// that did not land is recorded on its own (complete).
func (r *runner) recordOutcome(cmd commands.Complete, next *startClaim, log *slog.Logger) (commands.CompleteResult, bool) {
	if next == nil {
		return r.complete(cmd, log)
	}
	defer next.record(r.ledger) // should anything below panic, the next job still gets its start
	// The start records the next job's plugin process: wait for its spawn.
	<-next.ready
	res := commands.HandOff(context.Background(), r.ledger, commands.Handoff{Complete: cmd, Next: next.cmd})
	next.answer(res.Started, res.StartErr)
	return r.settle(cmd, res.Completed, res.CompleteErr, log)
}

// complete records an attempt's outcome, again with backoff if the ledger
// could not take it for now (busy, full…): the outcome must not be lost. An
// outcome the ledger refuses for what it holds, or a completion that cannot
// be made of it, is replaced once by the attempt failed without the
// plugin's output (Complete.Refused), which ends the job. A transition
// error means an earlier try did land (or the job moved on).
func (r *runner) complete(cmd commands.Complete, log *slog.Logger) (commands.CompleteResult, bool) {
	res, err := commands.CompleteJob(context.Background(), r.ledger, cmd)
	return r.settle(cmd, res, err, log)
}

// settle is complete from a first try's answer (res, err) on.
func (r *runner) settle(cmd commands.Complete, res commands.CompleteResult, err error, log *slog.Logger) (commands.CompleteResult, bool) {
	backoff := 100 * time.Millisecond
	for tried := false; ; tried = true {
		if tried {
			res, err = commands.CompleteJob(context.Background(), r.ledger, cmd)
		}
		switch {
		case err == nil:
			return res, true
		case errors.Is(err, commands.ErrInvalidTransition):
			log.Warn("the job's outcome was not recorded: the job has moved on", "err", err)
			return res, false
		case errors.Is(err, ledger.ErrClosed):
			log.Error("the job's outcome was not recorded: the ledger is closed; recovery will run it again", "err", err)
			return res, false
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
		case <-r.stopped.Done():
			t.Stop()
			log.Error("gave up recording the job's outcome at shutdown; recovery will run it again")
			return res, false
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// logOutcome logs where the job went.
func logOutcome(log *slog.Logger, job *commands.Job, out commands.Outcome, res commands.CompleteResult) {
	attrs := []any{"attempt", job.Attempt, "duration_ms", out.Duration.Milliseconds(), "status", res.Status}
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

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func pluginLevel(l string) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
