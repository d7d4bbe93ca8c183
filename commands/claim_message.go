package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// ClaimMessageCmd claims message MessageID for Group by Worker under a
// lease until Now+Lease. A group claims a message once: again only when
// its claim's lease ran out (the sweeper or this claim records the
// expiry), after the topic's backoff; once MaxAttempts claims of the group
// expired, the claim records the last expiry with the message's dead
// letter (<topic>.dead) instead, in one append.
type ClaimMessageCmd struct {
	MessageID   string
	Group       string
	Worker      string
	Lease       time.Duration
	Now         time.Time
	MaxAttempts int
	// Backoff is the wait after the attempt-th claim expired.
	Backoff func(attempt int) time.Duration
}

// MessageClaimed is what a claim decided: the claim (Claimed), or why not:
// RetryAt (the group may claim it again then), DeadLetter (the claim
// recorded the message's dead letter instead), neither (its claim holds,
// or the group is done with it).
type MessageClaimed struct {
	Claimed    bool
	Message    events.Message
	Fence      int64
	LeaseUntil time.Time
	Attempt    int
	RetryAt    time.Time
	DeadLetter *events.Message
}

// ClaimMessage decides a claim on the message's stream and appends it with
// the stream's expected version: of two claims of one message by one group,
// the second finds the first's and is refused (Claimed false).
func ClaimMessage(ctx context.Context, l *ledger.Ledger, cmd ClaimMessageCmd) (MessageClaimed, error) {
	if cmd.Lease <= 0 || cmd.Group == "" || cmd.Worker == "" {
		return MessageClaimed{}, fmt.Errorf("%w: claim message %s: a claim needs a group, a worker and a lease > 0", ErrInvalidCommand, cmd.MessageID)
	}
	if cmd.MaxAttempts < 1 {
		cmd.MaxAttempts = 1
	}
	var res MessageClaimed
	err := decideMessage(ctx, l, ledger.Durable, cmd.MessageID, func(_ *ledger.Tx, m *TopicMessage) (evs []ledger.NewEvent, err error) {
		evs, res, err = cmd.decide(m)
		return evs, err
	})
	if err != nil {
		return MessageClaimed{}, fmt.Errorf("claim message: %w", err)
	}
	return res, nil
}

func (cmd ClaimMessageCmd) decide(m *TopicMessage) ([]ledger.NewEvent, MessageClaimed, error) {
	res := MessageClaimed{Message: m.Message}
	attempt := 1
	if c, ok := m.Claim(cmd.Group); ok {
		switch {
		case c.Done:
			return nil, res, nil
		case c.Status == events.ClaimActive && cmd.Now.Before(c.LeaseUntil):
			return nil, res, nil // its lease holds
		case c.Attempt >= cmd.MaxAttempts: // its lease ran out on the last attempt
			evs, dead, err := deadLetter(m, c, cmd.Now)
			res.DeadLetter = &dead
			return evs, res, err
		}
		// Its lease ran out (recorded as expired or not): claimable again
		// after the backoff.
		if due := c.LeaseUntil.Add(cmd.Backoff(c.Attempt)); cmd.Now.Before(due) {
			res.RetryAt = due
			return nil, res, nil
		}
		attempt = c.Attempt + 1
	}
	until := cmd.Now.Add(cmd.Lease)
	fence := m.Version + 1
	ev := m.next(events.MessageClaimed, events.MessageClaim{Group: cmd.Group, Worker: cmd.Worker, Fence: fence, LeaseUntil: Time(until),
		Attempt: attempt}, events.ActorWorker)
	res.Claimed, res.Fence, res.LeaseUntil, res.Attempt = true, fence, until, attempt
	return []ledger.NewEvent{ev}, res, nil
}

// deadLetter ends claim c of m as expired with the message's dead letter
// (<topic>.dead: its body and metadata, in its conversation) published in
// the same append.
func deadLetter(m *TopicMessage, c GroupClaim, now time.Time) ([]ledger.NewEvent, events.Message, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return nil, events.Message{}, err
	}
	dead := events.Message{ID: u.String(), Topic: m.Message.Topic + events.DeadTopicSuffix, Body: m.Message.Body, ParentID: m.Message.ID,
		ConversationID: m.Message.ConversationID, Producer: c.Group, Metadata: m.Message.Metadata, CreatedAt: Time(now)}
	end := m.next(events.MessageClaimEnded, events.MessageClaimEndedData{Group: c.Group, Worker: c.Worker, Fence: c.Fence,
		Status: events.ClaimExpired, FollowUpID: dead.ID,
		Error: fmt.Sprintf("the lease of claim %d ran out; %d attempts used: dead-lettered to %s", c.Attempt, c.Attempt, dead.Topic)}, events.ActorDaemon)
	pub := ledger.NewEvent{Stream: events.MessageStream(dead.ID), Type: events.MessagePublished, Data: dead,
		Meta: ledger.Meta{CorrelationID: dead.ConversationID, CausationID: m.Message.ID, Actor: events.ActorDaemon}}
	return []ledger.NewEvent{end, pub}, dead, nil
}
