package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// RenewMessageCmd extends a group's claim of a message to Now+Lease.
// Renewals are coalesced: message.lease_renewed is appended only when it
// moves lease_until on by a third of Lease or more.
type RenewMessageCmd struct {
	MessageID string
	MessageFence
	Lease time.Duration
	Now   time.Time
}

// RenewMessage renews a claim's lease and returns the lease_until recorded
// (the worker must renew before it), or, with a stale fence, records
// message.superseded and returns a *MessageStaleFenceError. A renewal is a
// relaxed append: losing one to a power cut only shortens the lease.
func RenewMessage(ctx context.Context, l *ledger.Ledger, cmd RenewMessageCmd) (time.Time, error) {
	if cmd.Lease <= 0 {
		return time.Time{}, fmt.Errorf("%w: renew message %s: the lease must be > 0", ErrInvalidCommand, cmd.MessageID)
	}
	var until time.Time
	var stale *MessageStaleFenceError
	err := decideMessage(ctx, l, ledger.Relaxed, cmd.MessageID, func(_ *ledger.Tx, m *TopicMessage) (evs []ledger.NewEvent, err error) {
		evs, until, stale = cmd.decide(m)
		return evs, nil
	})
	if err == nil && stale != nil {
		err = stale
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("renew message: %w", err)
	}
	return until, nil
}

func (cmd RenewMessageCmd) decide(m *TopicMessage) ([]ledger.NewEvent, time.Time, *MessageStaleFenceError) {
	if superseded, stale := cmd.checkFence(m, events.RefusedRenew); stale != nil {
		return superseded, time.Time{}, stale
	}
	c, _ := m.Claim(cmd.Group)
	until := cmd.Now.Add(cmd.Lease)
	if until.Sub(c.LeaseUntil) < cmd.Lease/3 {
		return nil, c.LeaseUntil, nil // coalesced: the lease recorded holds for 2/3 of a lease or more
	}
	ev := m.next(events.MessageLeaseRenewed, events.MessageLeaseRenewedData{Group: cmd.Group, Fence: cmd.Fence, LeaseUntil: Time(until)}, events.ActorWorker)
	return []ledger.NewEvent{ev}, until, nil
}
