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

// callTimeout bounds one call to the daemon but a claim.
const callTimeout = 30 * time.Second

// lastReportFor is how long a job's last reports (stderr batches, export
// items, its completion) are still tried once the host's shutdown grace
// is over, before they are dropped (the lease then expires and the
// daemon's retry policy decides). While the host runs they are tried
// until the daemon takes or refuses them. A variable for the tests only.
var lastReportFor = 10 * time.Second

// reportContext is the context of claim's reports to the daemon: it
// lasts while the host runs (a daemon away for a while, a restart, is
// waited for: a finished result is never dropped for it), and for
// lastReportFor once jobs ends (the host stopped and its grace is over).
func reportContext(jobs context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(jobs))
	stop := context.AfterFunc(jobs, func() { time.AfterFunc(lastReportFor, cancel) })
	return ctx, func() {
		stop()
		cancel()
	}
}

// runClaim runs claim's plugin and reports the attempt; true if the
// daemon accepted its completion. The lease is renewed until the
// completion is delivered, not only while the plugin runs: a completion
// that waits for the daemon to come back must not find the lease expired.
func (h *Host) runClaim(jobs context.Context, claim *engine.Claimed) bool {
	claimedAt := time.Now()
	var claimToStart time.Duration
	log := h.log.With("job_id", claim.JobID, "plugin", claim.Plugin, "command", claim.Command, "attempt", claim.Attempt, "fence", claim.Fence)
	report, endReport := reportContext(jobs)
	defer endReport()
	p, ok := h.byName[claim.Plugin]
	if !ok {
		// The daemon gave a job of a plugin this host did not register:
		// say so, and let the job's retry policy decide.
		err := retry(report, log, "failure", func(ctx context.Context) error {
			return h.o.Client.Fail(ctx, claim, events.OutcomeError, "worker "+h.o.Client.Worker().Name+" has no plugin "+claim.Plugin, true)
		})
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
	defer func() {
		close(renewDone)
		<-renewStopped
	}()
	logs := newLogSender(report, h.o.Client, claim, log)
	forward := newForwarder(report, h.o.Client, claim, log)
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
		OnStderr: logs.take,
		Control:  forward.take,
	})
	// The plugin's output, then its outcome: the daemon orders them so.
	logs.close()
	forward.close(report)
	if cause := context.Cause(run); errors.Is(cause, errLeaseLost) {
		h.dropped()
		log.Warn("job dropped: the daemon gave it to another worker (stale fence); its outcome here is not reported", "outcome", res.Kind)
		return false
	}
	a := attemptOf(claim, h.o.Client.Worker(), res, context.Cause(run))
	return h.complete(report, a, log.With("claim_to_start_us", claimToStart.Microseconds()))
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

// complete delivers a, trying again while the daemon cannot take it
// (away, restarting, or answering 5xx) until ctx ends (reportContext);
// true if it was accepted. A refusal (stale fence, or any other 4xx) drops
// it: never retried.
func (h *Host) complete(ctx context.Context, a engine.Attempt, log *slog.Logger) bool {
	err := retry(ctx, log, "completion", func(ctx context.Context) error { return h.o.Client.Complete(ctx, a) })
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
	case permanent(err):
		h.dropped()
		log.Error("completion refused; dropped (the lease expires and the daemon's retry policy decides)", "err", err)
	default:
		h.dropped()
		log.Error("completion not delivered before the worker stopped; dropped (the lease expires and the daemon's retry policy decides)", "err", err)
	}
	return false
}

func (h *Host) dropped() {
	h.metrics.mu.Lock()
	h.metrics.Dropped++
	h.metrics.mu.Unlock()
}

// renew renews claim's lease every third of the lease period until done
// is closed (the completion was delivered or dropped) or ctx ends: a
// renewal that says cancel_requested kills the plugin (errCanceled), one
// refused as stale drops the job (errLeaseLost). A renewal that fails
// otherwise (the daemon is away) is tried again after a backoff, sooner
// than the next period, so that one gets through as soon as the daemon is
// back; the plugin goes on meanwhile.
func (h *Host) renew(ctx context.Context, claim *engine.Claimed, stop context.CancelCauseFunc, done <-chan struct{}, log *slog.Logger) {
	period := max(h.lease/3, 10*time.Millisecond)
	t := time.NewTimer(period)
	defer t.Stop()
	var b backoff
	leaseUntil := claim.LeaseUntil
	warnedPast := false // said that the lease's end passed without a renewal
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, min(callTimeout, h.lease))
		r, err := h.o.Client.Renew(rctx, claim)
		cancel()
		next := period
		switch {
		case err == nil:
			b.reset()
			leaseUntil, warnedPast = r.LeaseUntil, false
			if r.CancelRequested {
				log.Info("cancel requested: stopping the plugin")
				stop(errCanceled)
			}
		case IsStaleFence(err):
			stop(errLeaseLost)
			return
		case ctx.Err() != nil:
			return
		default:
			next = min(b.after(err), period)
			if !leaseUntil.IsZero() && time.Now().After(leaseUntil) && !warnedPast {
				warnedPast = true
				log.Warn("renewal failed past the lease's end: the plugin goes on; when the daemon answers it says whether the job is still this worker's",
					"lease_until", leaseUntil, "err", err)
			}
			logRetry(log, "renewal failed; trying again", err, next, "lease_until", leaseUntil,
				"hint", "the lease expires unless a renewal gets through before lease_until; is the daemon reachable?")
		}
		t.Reset(next)
	}
}
