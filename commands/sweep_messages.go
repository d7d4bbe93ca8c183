package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// ExpireMessageClaim records that a group's claim of a message under Fence
// ran out its lease by Now: message.claim_ended with status expired, and,
// when it was the group's MaxAttempts-th claim, the message's dead letter
// (<topic>.dead) in the same append. A claim renewed, ended or replaced
// meanwhile is left alone.
type ExpireMessageClaim struct {
	MessageID   string
	Group       string
	Fence       int64
	Now         time.Time
	MaxAttempts int
}

// MessageExpired is what an expiry recorded: Expired (false: the claim had
// moved on), and the dead letter, if any.
type MessageExpired struct {
	Expired    bool
	Attempt    int
	DeadLetter *events.Message
}

// SweepMessageClaim decides one expiry (the sweeper's, for each claim whose
// lease it found run out).
func SweepMessageClaim(ctx context.Context, l *ledger.Ledger, cmd ExpireMessageClaim) (MessageExpired, error) {
	var res MessageExpired
	err := decideMessage(ctx, l, ledger.Durable, cmd.MessageID, func(_ *ledger.Tx, m *TopicMessage) (evs []ledger.NewEvent, err error) {
		evs, res, err = cmd.decide(m)
		return evs, err
	})
	if err != nil {
		return MessageExpired{}, fmt.Errorf("expire message claim: %w", err)
	}
	return res, nil
}

func (cmd ExpireMessageClaim) decide(m *TopicMessage) ([]ledger.NewEvent, MessageExpired, error) {
	c, ok := m.Claim(cmd.Group)
	if !ok || c.Status != events.ClaimActive || c.Fence != cmd.Fence || cmd.Now.Before(c.LeaseUntil) {
		return nil, MessageExpired{}, nil
	}
	res := MessageExpired{Expired: true, Attempt: c.Attempt}
	if c.Attempt >= max(cmd.MaxAttempts, 1) {
		evs, dead, err := deadLetter(m, c, cmd.Now)
		res.DeadLetter = &dead
		return evs, res, err
	}
	ev := m.next(events.MessageClaimEnded, events.MessageClaimEndedData{Group: c.Group, Worker: c.Worker, Fence: c.Fence,
		Status: events.ClaimExpired, Error: fmt.Sprintf("the lease of claim %d ran out (%s)", c.Attempt, Time(c.LeaseUntil))}, events.ActorDaemon)
	return []ledger.NewEvent{ev}, res, nil
}
