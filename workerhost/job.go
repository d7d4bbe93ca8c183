package workerhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// Bounds of reporting one job.
const (
	// callTimeout bounds one renewal, log batch or control call.
	callTimeout = 30 * time.Second
	// completeFor is how long a completion the daemon cannot be reached
	// for is tried again before the job is dropped (its lease then
	// expires and the daemon's retry policy decides).
	completeFor = 2 * time.Minute
)

// runClaim runs claim's plugin and reports the attempt; true if the
// daemon accepted its completion.
func (h *Host) runClaim(jobs context.Context, claim *engine.Claimed) bool {
	claimedAt := time.Now()
	var claimToStart time.Duration
	log := h.log.With("job_id", claim.JobID, "plugin", claim.Plugin, "command", claim.Command, "attempt", claim.Attempt, "fence", claim.Fence)
	p, ok := h.byName[claim.Plugin]
	if !ok {
		// The daemon gave a job of a plugin this host did not register:
		// say so, and let the job's retry policy decide.
		err := h.o.Client.Fail(jobs, claim, events.OutcomeError, "worker "+h.o.Client.Worker().Name+" has no plugin "+claim.Plugin, true)
		log.Error("claimed a job of a plugin this worker does not serve", "err", err)
		return false
	}
	run, stop := context.WithCancelCause(jobs)
	defer stop(nil)
	renewDone := make(chan struct{})
	renewStopped := make(chan struct{})
	go func() {
		defer close(renewStopped)
		h.renew(jobs, claim, stop, renewDone, log)
	}()
	forward := newForwarder(h.o.Client, claim, log)
	req := claim.Request
	if req.JobID == "" {
		req.JobID = claim.JobID
	}
	timeout := claim.Timeout
	if !claim.DeadlineAt.IsZero() {
		timeout = max(time.Until(claim.DeadlineAt), time.Millisecond)
	}
	log.Debug("running")
	res := pluginhost.Run(run, p, req, pluginhost.RunOptions{
		Timeout: timeout, Grace: h.o.KillGrace, RunID: claim.JobID, TraceID: claim.TraceID,
		OnStart: func(int) {
			d := time.Since(claimedAt)
			claimToStart = d
			h.metrics.mu.Lock()
			h.metrics.ClaimToStart = append(h.metrics.ClaimToStart, d)
			h.metrics.mu.Unlock()
		},
		OnStderr: func(lines pluginhost.StderrLines) {
			ctx, cancel := context.WithTimeout(jobs, callTimeout)
			defer cancel()
			if err := h.o.Client.Logs(ctx, claim, lines); err != nil {
				log.Warn("stderr lines not delivered", "lines", len(lines.Lines), "err", err)
			}
		},
		Control: forward.take,
	})
	close(renewDone)
	<-renewStopped
	flush, cancelFlush := context.WithTimeout(context.WithoutCancel(jobs), callTimeout)
	forward.close(flush)
	cancelFlush()
	if cause := context.Cause(run); errors.Is(cause, errLeaseLost) {
		h.dropped()
		log.Warn("job dropped: the daemon gave it to another worker (stale fence); its outcome here is not reported", "outcome", res.Kind)
		return false
	}
	a := attemptOf(claim, h.o.Client.Worker(), res, context.Cause(run))
	return h.complete(jobs, a, log.With("claim_to_start_us", claimToStart.Microseconds()))
}

// attemptOf is how res went, for the daemon to record: as the dispatcher
// records a local run (dispatch.attemptOf), with the lease's fence.
func attemptOf(claim *engine.Claimed, worker events.Worker, res pluginhost.Result, cause error) engine.Attempt {
	a := engine.Attempt{JobID: claim.JobID, Attempt: claim.Attempt, Worker: worker, Fence: claim.Fence,
		Kind: res.Kind, Retryable: res.Retryable, Error: res.Err, ExitCode: res.ExitCode, Duration: res.Duration,
		Stderr: string(res.Stderr), StderrTruncated: res.StderrTruncated, EndedAt: time.Now()}
	if res.StderrTruncated {
		a.StderrBytes = res.StderrBytes
	}
	if res.Response != nil {
		a.Response = json.RawMessage(bytes.TrimSpace(res.Stdout))
	} else if len(res.Stdout) > 0 {
		stdout, cut := pluginhost.Excerpt(res.Stdout, res.StdoutBytes)
		a.Stdout = string(stdout)
		if cut {
			a.StdoutBytes = max(res.StdoutBytes, int64(len(res.Stdout)))
		}
	}
	if res.Kind == events.OutcomeCanceled {
		if errors.Is(cause, errShutdown) {
			a.Kind, a.Retryable, a.Error = events.OutcomeInterrupted, true, errShutdown.Error()
		} else {
			a.Kind, a.Retryable, a.Error = events.OutcomeCanceled, false, errCanceled.Error()
		}
	}
	return a
}

// complete delivers a, trying again while the daemon cannot be reached
// (for completeFor at most); true if it was accepted. A refusal (stale
// fence, or any other 4xx) drops it: never retried.
func (h *Host) complete(ctx context.Context, a engine.Attempt, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completeFor)
	defer cancel()
	var b backoff
	for {
		err := h.o.Client.Complete(ctx, a)
		switch {
		case err == nil:
			h.metrics.mu.Lock()
			h.metrics.Completed++
			h.metrics.mu.Unlock()
			log.Info("job completed", "outcome", a.Kind, "duration", a.Duration)
			return true
		case IsStaleFence(err):
			h.dropped()
			log.Warn("completion refused: the job's lease had passed to another worker (stale fence); recorded as superseded by the daemon, dropped here", "outcome", a.Kind)
			return false
		case permanent(err):
			h.dropped()
			log.Error("completion refused; dropped (the lease expires and the daemon's retry policy decides)", "err", err)
			return false
		}
		wait := b.next()
		log.Warn("completion not delivered; trying again", "err", err, "retry_in", wait.Round(time.Millisecond))
		if !sleep(ctx, wait) {
			h.dropped()
			log.Error("completion not delivered in time; dropped (the lease expires and the daemon's retry policy decides)", "err", err)
			return false
		}
	}
}

func (h *Host) dropped() {
	h.metrics.mu.Lock()
	h.metrics.Dropped++
	h.metrics.mu.Unlock()
}

// renew renews claim's lease every third of the lease period until done
// is closed: a renewal that says cancel_requested kills the plugin
// (errCanceled), one refused as stale drops the job (errLeaseLost).
func (h *Host) renew(ctx context.Context, claim *engine.Claimed, stop context.CancelCauseFunc, done <-chan struct{}, log *slog.Logger) {
	period := max(h.lease/3, 10*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, min(callTimeout, h.lease))
		r, err := h.o.Client.Renew(rctx, claim)
		cancel()
		switch {
		case err == nil && r.CancelRequested:
			log.Info("cancel requested: stopping the plugin")
			stop(errCanceled)
		case err == nil:
		case IsStaleFence(err):
			stop(errLeaseLost)
			return
		default:
			log.Warn("renewal failed; trying again at the next renewal", "err", err,
				"hint", "the lease expires unless a renewal gets through before it; is the daemon reachable?")
		}
	}
}
