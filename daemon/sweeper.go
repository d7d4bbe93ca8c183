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
// passed (engine.Sweep), and the topic message claims whose lease ran out
// (engine.SweepMessages). It sleeps on one timer set to the earliest
// lease_until or deadline_at ahead; a claim's lease that runs out sooner
// (Fleet.Leases, Fleet.NextLease) only moves the timer earlier. Renewals
// and completions only make leases later or fewer: the timer firing early
// costs one sweep that finds nothing. No polling.
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
	fleet := s.core.Engine().Fleet() // shared by every Engine of the daemon
	timer := time.NewTimer(0)        // the first sweep: leases left by the last run
	defer timer.Stop()
	var armed time.Time // when the timer fires; zero: it is stopped
	arm := func(at time.Time) {
		timer.Stop()
		armed = at
		if !at.IsZero() {
			timer.Reset(max(0, at.Sub(fleet.Now())))
		}
	}
	defer func() {
		// The remote attempts' run reports stop with the daemon.
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		fleet.Close(closing)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-fleet.Leases():
			if at := fleet.NextLease(); !at.IsZero() && (armed.IsZero() || at.Before(armed)) {
				arm(at)
			}
			continue
		case <-timer.C:
		}
		next, err := s.core.Engine().Sweep(ctx, s.log)
		if err != nil && ctx.Err() == nil {
			s.log.Error("sweeping remote leases failed; trying again", "err", err, "retry_in", sweeperRetry)
			next = fleet.Now().Add(sweeperRetry)
		}
		// The topic exchange's claims (message.claimed) share the timer:
		// their claims signal Leases too.
		messages, err := s.core.Engine().SweepMessages(ctx, fleet.Now())
		if err != nil && ctx.Err() == nil {
			s.log.Error("sweeping message claims failed; trying again", "err", err, "retry_in", sweeperRetry)
			messages = fleet.Now().Add(sweeperRetry)
		}
		if !messages.IsZero() && (next.IsZero() || messages.Before(next)) {
			next = messages
		}
		// A claim made during the sweep may run out before next.
		if at := fleet.NextLease(); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
		arm(next)
	}
}
