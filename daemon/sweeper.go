package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// sweeperRetry is how soon the sweeper tries again after a sweep failed.
const sweeperRetry = 5 * time.Second

// sweeper ends the remote attempts whose lease ran out or whose deadline
// passed (engine.Sweep). It sleeps on one timer set to the earliest
// lease_until or deadline_at ahead, and reads the leases again when a
// claim makes one that may run out sooner (Fleet.Leases): no polling.
type sweeper struct {
	core *Core
	log  *slog.Logger

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// startSweeper starts the sweeper of c's remote leases; stop stops it.
func startSweeper(ctx context.Context, c *Core, log *slog.Logger) *sweeper {
	ctx, cancel := context.WithCancel(ctx)
	s := &sweeper{core: c, log: log.With("component", "sweeper"), cancel: cancel}
	s.done.Add(1)
	go s.run(ctx)
	return s
}

// stop stops the sweeper and waits for it.
func (s *sweeper) stop() {
	s.cancel()
	s.done.Wait()
}

func (s *sweeper) run(ctx context.Context) {
	defer s.done.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.core.Engine().Fleet().Leases():
		}
		e := s.core.Engine()
		next, err := e.Sweep(ctx, s.log)
		wait := time.Duration(-1)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("sweeping remote leases failed; trying again", "err", err, "retry_in", sweeperRetry)
			wait = sweeperRetry
		case !next.IsZero():
			wait = max(0, next.Sub(e.Fleet().Now()))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
	}
}
