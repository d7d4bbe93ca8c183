package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// RunJob runs one job in the calling goroutine until it is terminal,
// retries included (waiting for each retry's time), without a dispatch
// loop: what plugin run does when no daemon is running. The caller holds the
// state directory's lock, so nothing else runs the job. Canceling ctx
// cancels the job, with ctx's cause as the reason recorded when it has one.
// A cancel requested from elsewhere (job cancel) stops it too.
func RunJob(ctx context.Context, opts Options, id string) error {
	opts = opts.withDefaults()
	l := opts.Engine.Ledger()
	r := newRunner(opts, context.Background())
	read := context.WithoutCancel(ctx) // a canceled ctx still ends the job
	// why is the reason a job canceled before its attempt started records.
	why := func() string {
		if cause := context.Cause(ctx); cause != context.Canceled {
			return cause.Error()
		}
		return "interrupted"
	}
	for {
		j, at, err := loadJob(read, l, id)
		if err != nil {
			return err
		}
		if j.Terminal() {
			return nil
		}
		if j.Status != events.StatusQueued {
			return fmt.Errorf("run job %s: it is %s elsewhere", id, j.Status)
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), cancelQueued(read, opts, id, why()))
		}
		if wait := j.NextRetryAt.Sub(opts.Now()); wait > 0 {
			r.log.Info("waiting for the retry", "job_id", id, "attempt", j.Attempt, "next_retry_at", commands.Time(j.NextRetryAt))
			// Until the retry is due, or the job's stream moves (a cancel
			// from elsewhere): then look again.
			due, stop := context.WithTimeout(ctx, wait)
			_, err := l.Follow(due, at, ledger.Filter{Stream: events.JobStream(id)}, func(ledger.Event) error { return ledger.ErrStopFollowing })
			if err != nil && due.Err() == nil {
				// A read failed: look again after a pause, not at once.
				r.log.Warn("reading the job while waiting for its retry failed; looking again in 1s", "job_id", id, "err", err)
				t := time.NewTimer(time.Second)
				select {
				case <-due.Done():
				case <-t.C:
				}
				t.Stop()
			}
			stop()
			if ctx.Err() != nil {
				return errors.Join(ctx.Err(), cancelQueued(read, opts, id, why()+" while waiting for a retry"))
			}
			continue
		}
		c := candidate{id: id, plugin: j.Plugin, command: j.Command, dedupeKey: j.DedupeKey, traceID: j.TraceID}
		runCtx, cancel := context.WithCancelCause(context.Background())
		stop := context.AfterFunc(ctx, func() { cancel(cancelCause(ctx)) })
		watched := make(chan struct{})
		go watchCancel(runCtx, l, r.log, id, j.Version, cancel, watched)
		a := r.run(runCtx, c, r.newClaim(c, false), nil)
		stop()
		cancel(nil)
		<-watched
		if refusedForNow(a.startErr) {
			// Not started, the ledger refused for now (busy, full…): wait
			// for the pause that set. Otherwise (canceled, or started
			// elsewhere) look again.
			t := time.NewTimer(r.pause.left())
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
}

// loadJob folds the job's stream, and says the seq of its last event.
func loadJob(ctx context.Context, l *ledger.Ledger, id string) (*commands.Job, int64, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, 0, err
	}
	j, err := commands.FoldJob(evs)
	if err != nil {
		return nil, 0, fmt.Errorf("run job %s: %w", id, err)
	}
	return j, evs[len(evs)-1].Seq, nil
}

// watchCancel cancels the job RunJob runs when a cancel request for it is
// appended after its stream's version at, by job cancel in another process,
// until ctx ends. A failed read is tried again, from where it stopped, after
// a pause.
func watchCancel(ctx context.Context, l *ledger.Ledger, log *slog.Logger, id string, at int64, cancel context.CancelCauseFunc, done chan<- struct{}) {
	defer close(done)
	var after int64
	for {
		last, err := l.Follow(ctx, after, ledger.Filter{Stream: events.JobStream(id)}, func(ev ledger.Event) error {
			if ev.Version > at && ev.Type == events.JobCancelRequested {
				cancel(errCanceledByUser)
				return ledger.ErrStopFollowing
			}
			return nil
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		after = last
		log.Warn("watching the job for a cancel request failed; looking again in 1s", "job_id", id, "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// cancelQueued cancels a queued job RunJob will not start, for reason; one
// that ended meanwhile is left as it is.
func cancelQueued(ctx context.Context, opts Options, id, reason string) error {
	_, err := commands.CancelJob(ctx, opts.Engine.Ledger(), commands.Cancel{JobID: id, Reason: reason, Now: opts.Now(),
		Pipelines: opts.Engine.PipelineRuntime()})
	if errors.Is(err, commands.ErrInvalidTransition) {
		return nil // it ended meanwhile
	}
	return err
}
