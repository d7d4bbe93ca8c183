package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/queries"
)

// SweepMessages records the expiry of every active message claim whose
// lease ran out by now (message.claim_ended, status expired): the message
// may be claimed again after the topic's backoff, or, when that claim was
// the group's topics.<name>.max_attempts-th, gets its dead letter
// (<topic>.dead) in the same append. It returns the earliest lease_until
// still ahead (zero: no claim is active): the daemon's sweeper sets its
// timer to it. Claims do not depend on it (a claim treats a run-out lease
// as expired itself); it makes expiries and dead letters visible without
// a claim.
func (e *Engine) SweepMessages(ctx context.Context, now time.Time) (time.Time, error) {
	var active []queries.ListActiveTopicClaimsRow
	err := e.ledger.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		return queries.ListActiveTopicClaims(conn, func(r queries.ListActiveTopicClaimsRow) error {
			active = append(active, r)
			return nil
		})
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("sweep message claims: %w", err)
	}
	var next time.Time
	var errs []error
	for _, c := range active {
		until, err := time.Parse(time.RFC3339Nano, c.LeaseUntil)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep message %s: lease_until: %w", c.MessageID, err))
			continue
		}
		if now.Before(until) {
			if next.IsZero() || until.Before(next) {
				next = until
			}
			continue
		}
		_, err = commands.SweepMessageClaim(ctx, e.ledger, commands.ExpireMessageClaim{MessageID: c.MessageID, Group: c.WorkerGroup,
			Fence: c.Fence, Now: now, MaxAttempts: e.config.Topic(c.Topic).MaxAttempts})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return next, errors.Join(errs...)
}
