package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// Retention timing: the first prune shortly after start, then hourly.
const (
	retentionFirst = time.Minute
	retentionEvery = time.Hour
)

// retention prunes job logs past service.job_log_retention: at each due
// time it counts what is older than the cutoff and, only if there is
// something, records log.pruned and waits for the projector to apply it.
// It sleeps on a timer between due times.
type retention struct {
	ledger    *ledger.Ledger
	projector *projections.Projector
	keep      func() time.Duration // service.job_log_retention now (a reload may change it; ≤ 0: keep all)
	log       *slog.Logger
	// now and after are the clock (time.Now, time.After unless a test
	// injects its own).
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start runs the loop until stop.
func (r *retention) start(ctx context.Context) {
	if r.now == nil {
		r.now = time.Now
	}
	if r.after == nil {
		r.after = time.After
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.run(ctx)
	}()
}

// stop ends the loop and waits for it.
func (r *retention) stop() {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
	}
}

func (r *retention) run(ctx context.Context) {
	wait := retentionFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.after(wait):
		}
		if err := r.pruneOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("pruning job logs failed; will try again at the next due time", "err", err)
		}
		wait = retentionEvery
	}
}

// pruneOnce records log.pruned for the cutoff now − retention if any job's
// log is older, and waits until the projector has applied it (so the next
// count sees the rows gone).
func (r *retention) pruneOnce(ctx context.Context) error {
	keep := r.keep()
	if keep <= 0 {
		return nil
	}
	before := r.now().Add(-keep)
	n, err := views.PrunableJobs(ctx, r.ledger, before)
	if err != nil || n == 0 {
		return err
	}
	seq, err := commands.PruneJobLogs(ctx, r.ledger, commands.PruneLogs{Before: before, Retention: keep, Jobs: n, By: events.ActorDaemon})
	if err != nil {
		return err
	}
	r.log.Info("pruned job logs", "jobs", n, "before", before.UTC().Format(time.RFC3339), "seq", seq)
	return r.projector.WaitFor(ctx, seq)
}
