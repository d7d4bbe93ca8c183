package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// FinishMessageCmd ends a group's claim of a message with Status
// (completed, failed or timed_out) and publishes the follow-up, if
// FollowUpTopic is given, in the same append: to FollowUpTopic with Body,
// as a child of the message in its conversation, produced by the group,
// with Metadata (empty: the message's).
type FinishMessageCmd struct {
	MessageID string
	MessageFence
	Status        events.ClaimStatus
	Error         string
	FollowUpID    string // empty: a new UUIDv7
	FollowUpTopic string
	Body          string
	Metadata      json.RawMessage
	Now           time.Time
	// Listeners, if set, enqueue the jobs and start the runs that listen
	// on the follow-up's topic, in the same append.
	Listeners *TopicListeners
}

// MessageFinished is what a finish recorded: the follow-up (nil: none).
type MessageFinished struct {
	FollowUp *events.Message
}

// FinishMessage ends a claim. With a stale fence (another claim holds the
// message, or the claim ended: a second finish of one claim is stale) it
// records message.superseded instead and returns a *MessageStaleFenceError,
// so a follow-up is published once.
func FinishMessage(ctx context.Context, l *ledger.Ledger, cmd FinishMessageCmd) (MessageFinished, error) {
	if !cmd.Status.Finished() {
		return MessageFinished{}, fmt.Errorf("%w: finish message %s: status %q: completed, failed or timed_out", ErrInvalidCommand, cmd.MessageID, cmd.Status)
	}
	var followUp *events.Message
	if cmd.FollowUpTopic != "" {
		pub := Publish{ID: cmd.FollowUpID, Topic: cmd.FollowUpTopic, Body: cmd.Body, ParentID: cmd.MessageID, Producer: cmd.Group,
			Metadata: cmd.Metadata, Now: cmd.Now}
		m, err := pub.message()
		if err != nil {
			return MessageFinished{}, fmt.Errorf("finish message %s: the follow-up: %w", cmd.MessageID, err)
		}
		followUp = &m
	}
	var res MessageFinished
	var stale *MessageStaleFenceError
	err := decideMessage(ctx, l, ledger.Durable, cmd.MessageID, func(tx *ledger.Tx, m *TopicMessage) (evs []ledger.NewEvent, err error) {
		evs, res, stale, err = cmd.decide(tx, m, followUp)
		return evs, err
	})
	if err == nil && stale != nil {
		err = stale
	}
	if err != nil {
		return MessageFinished{}, fmt.Errorf("finish message: %w", err)
	}
	return res, nil
}

func (cmd FinishMessageCmd) decide(tx *ledger.Tx, m *TopicMessage, followUp *events.Message) ([]ledger.NewEvent, MessageFinished, *MessageStaleFenceError, error) {
	if superseded, stale := cmd.checkFence(m, events.RefusedFinish); stale != nil {
		return superseded, MessageFinished{}, stale, nil
	}
	data := events.MessageClaimEndedData{Group: cmd.Group, Worker: cmd.Worker, Fence: cmd.Fence, Status: cmd.Status, Error: cmd.Error}
	var pub []ledger.NewEvent
	var res MessageFinished
	if followUp != nil {
		f := *followUp
		f.ConversationID = m.Message.ConversationID
		f.Depth = m.Message.Depth // a worker's reply is no route: it keeps the routes' count
		if len(f.Metadata) == 0 {
			f.Metadata = m.Message.Metadata
		}
		evs, msg, err := publishIn(tx, f, events.ActorWorker, cmd.Listeners)
		if err != nil {
			return nil, res, nil, err
		}
		data.FollowUpID, res.FollowUp, pub = msg.ID, &msg, evs
	}
	end := m.next(events.MessageClaimEnded, data, events.ActorWorker)
	return append([]ledger.NewEvent{end}, pub...), res, nil, nil
}
