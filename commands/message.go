package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

var (
	// ErrMessageNotFound means no message has that id.
	ErrMessageNotFound = errors.New("message not found")
	// ErrNotClaimable means the message cannot be claimed by the group now:
	// its claim holds, the group is done with it, or its backoff has not
	// passed.
	ErrNotClaimable = errors.New("message not claimable")
)

// TopicMessage is a message's state, folded from its stream: the message
// and each worker group's claim as last recorded.
type TopicMessage struct {
	Message events.Message
	Version int64
	// Claims holds one entry per group that claimed the message. It is
	// replaced, never changed in place (the ledger caches folds).
	Claims []GroupClaim
}

// GroupClaim is a worker group's claim of a message as last recorded.
type GroupClaim struct {
	Group      string
	Worker     string
	Status     events.ClaimStatus
	Fence      int64
	LeaseUntil time.Time
	Attempt    int
	// Done: the group is done with the message (its claim ended, or
	// expired into its dead letter).
	Done bool
}

// Claim returns group's claim, if it has one.
func (m *TopicMessage) Claim(group string) (GroupClaim, bool) {
	for _, c := range m.Claims {
		if c.Group == group {
			return c, true
		}
	}
	return GroupClaim{}, false
}

func (m *TopicMessage) setClaim(c GroupClaim) {
	claims := slices.Clone(m.Claims)
	for i := range claims {
		if claims[i].Group == c.Group {
			claims[i] = c
			m.Claims = claims
			return
		}
	}
	m.Claims = append(claims, c)
}

// FoldMessage folds a message's events (its whole stream).
func FoldMessage(evs []ledger.Event) (*TopicMessage, error) {
	var m TopicMessage
	for _, ev := range evs {
		if err := foldMessage(&m, ev); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

func foldMessage(m *TopicMessage, ev ledger.Event) error {
	if err := m.apply(ev); err != nil {
		return fmt.Errorf("fold %s v%d (%s): %w", ev.Stream, ev.Version, ev.Type, err)
	}
	m.Version = ev.Version
	return nil
}

func (m *TopicMessage) apply(ev ledger.Event) error {
	switch ev.Type {
	case events.MessagePublished:
		return json.Unmarshal(ev.Data, &m.Message)
	case events.MessageClaimed:
		var d events.MessageClaim
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		until, err := time.Parse(time.RFC3339Nano, d.LeaseUntil)
		if err != nil {
			return err
		}
		m.setClaim(GroupClaim{Group: d.Group, Worker: d.Worker, Status: events.ClaimActive, Fence: d.Fence, LeaseUntil: until, Attempt: d.Attempt})
	case events.MessageLeaseRenewed:
		var d events.MessageLeaseRenewedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		c, ok := m.Claim(d.Group)
		if !ok || c.Fence != d.Fence {
			return nil
		}
		until, err := time.Parse(time.RFC3339Nano, d.LeaseUntil)
		if err != nil {
			return err
		}
		c.LeaseUntil = until
		m.setClaim(c)
	case events.MessageClaimEnded:
		var d events.MessageClaimEndedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		c, ok := m.Claim(d.Group)
		if !ok || c.Fence != d.Fence {
			return nil
		}
		c.Status = d.Status
		c.Done = d.Status != events.ClaimExpired || d.FollowUpID != ""
		m.setClaim(c)
	}
	return nil
}

// LoadMessage folds message id's stream inside a decision.
func LoadMessage(tx *ledger.Tx, id string) (*TopicMessage, error) {
	m, err := ledger.Fold(tx, events.MessageStream(id), foldMessage)
	if err != nil {
		return nil, err
	}
	if m.Version == 0 {
		return nil, fmt.Errorf("%w: %s (see: ductile topic read)", ErrMessageNotFound, id)
	}
	return &m, nil
}

// next builds an event for the message's stream at its next version,
// carrying its conversation as correlation.
func (m *TopicMessage) next(typ string, data any, actor events.Actor) ledger.NewEvent {
	ev := ledger.NewEvent{Stream: events.MessageStream(m.Message.ID), ExpectedVersion: m.Version, Type: typ, Data: data,
		Meta: ledger.Meta{CorrelationID: m.Message.ConversationID, Actor: actor}}
	m.Version++
	return ev
}

// MessageFence is what a worker sends with a renewal or a finish: its
// group, its instance and the fence of its claim.
type MessageFence struct {
	Group  string
	Worker string
	Fence  int64
}

// MessageStaleFenceError says a renewal or finish came with a fence that
// no longer holds the group's claim: it was recorded as
// message.superseded and not applied. It unwraps to ErrStaleFence.
type MessageStaleFenceError struct {
	MessageID string
	Group     string
	Refused   string // events.RefusedRenew or events.RefusedFinish
	Fence     int64  // the fence sent
	Current   int64  // the fence of the group's active claim (0: none)
}

func (e *MessageStaleFenceError) Error() string {
	if e.Current > 0 {
		return fmt.Sprintf("message %s: group %s: fence %d is stale (another claim holds it under fence %d): the %s was recorded as superseded and not applied; drop the message",
			e.MessageID, e.Group, e.Fence, e.Current, e.Refused)
	}
	return fmt.Sprintf("message %s: group %s: fence %d is stale (no claim of the group holds it now): the %s was recorded as superseded and not applied; drop the message",
		e.MessageID, e.Group, e.Fence, e.Refused)
}

func (e *MessageStaleFenceError) Unwrap() error { return ErrStaleFence }

// checkFence returns nil if f holds the group's active claim of m, else
// the message.superseded to record and the error to answer.
func (f MessageFence) checkFence(m *TopicMessage, refused string) ([]ledger.NewEvent, *MessageStaleFenceError) {
	c, ok := m.Claim(f.Group)
	active := ok && c.Status == events.ClaimActive
	if active && c.Fence == f.Fence && f.Fence > 0 {
		return nil, nil
	}
	stale := &MessageStaleFenceError{MessageID: m.Message.ID, Group: f.Group, Refused: refused, Fence: f.Fence}
	if active {
		stale.Current = c.Fence
	}
	ev := m.next(events.MessageSuperseded, events.MessageSupersededData{Refused: refused, Group: f.Group, Worker: f.Worker,
		Fence: f.Fence, CurrentFence: stale.Current}, events.ActorWorker)
	return []ledger.NewEvent{ev}, stale
}

// decideMessage folds message id's stream in a decision of l, and appends
// what decide chooses with durability d (the write side's load, decide,
// append, for one message).
func decideMessage(ctx context.Context, l *ledger.Ledger, d ledger.Durability, id string, decide func(tx *ledger.Tx, m *TopicMessage) ([]ledger.NewEvent, error)) error {
	_, err := l.Decide(ctx, d, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		m, err := LoadMessage(tx, id)
		if err != nil {
			return nil, err
		}
		return decide(tx, m)
	})
	return err
}
