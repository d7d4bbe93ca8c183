package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Publish records a message on a topic. ID empty: a new UUIDv7. With
// ParentID and no ConversationID the message joins its parent's
// conversation; with neither it starts its own (its id).
type Publish struct {
	ID             string
	Topic          string
	Body           string
	ParentID       string
	ConversationID string
	Producer       string
	Metadata       json.RawMessage
	Actor          events.Actor
	Now            time.Time
	// DryRun decides (the parent looked up, the message built) and appends
	// nothing.
	DryRun bool
	// Listeners, if set, enqueue the jobs and start the runs that listen
	// on the topic, in the same append.
	Listeners *TopicListeners
}

// PublishMessage checks the message, looks its parent up, and appends its
// message.published (version 1 of its stream). It returns the message as
// recorded.
func PublishMessage(ctx context.Context, l *ledger.Ledger, cmd Publish) (events.Message, error) {
	m, err := cmd.message()
	if err != nil {
		return events.Message{}, fmt.Errorf("publish message: %w", err)
	}
	var out events.Message
	_, err = l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		evs, msg, err := publishIn(tx, m, cmd.Actor, cmd.Listeners)
		out = msg
		if cmd.DryRun {
			return nil, err
		}
		return evs, err
	})
	if err != nil {
		return events.Message{}, fmt.Errorf("publish message: %w", err)
	}
	return out, nil
}

// message builds and checks the message cmd asks for (its conversation
// still to be inherited).
func (cmd Publish) message() (events.Message, error) {
	id := cmd.ID
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return events.Message{}, err
		}
		id = u.String()
	}
	m := events.Message{ID: id, Topic: cmd.Topic, Body: cmd.Body, ParentID: cmd.ParentID, ConversationID: cmd.ConversationID,
		Producer: cmd.Producer, Metadata: compactMetadata(cmd.Metadata), CreatedAt: Time(cmd.Now)}
	return m, CheckMessage(m)
}

// compactMetadata is metadata as stored: compact JSON, or nothing for an
// empty object or null.
func compactMetadata(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if len(bytes.TrimSpace(raw)) == 0 || json.Compact(&buf, raw) != nil {
		return raw // CheckMessage says what is wrong with it
	}
	if s := buf.String(); s == "{}" || s == "null" {
		return nil
	}
	return buf.Bytes()
}

// CheckMessage checks a message against the exchange's rules: the topic's
// form, the caps on body and metadata, metadata a JSON object, ids and
// producer of sane length.
func CheckMessage(m events.Message) error {
	if !config.TopicName.MatchString(m.Topic) {
		return fmt.Errorf("%w: topic %q: a topic is 1 to %d of A-Z a-z 0-9 . _ : -", ErrInvalidCommand, m.Topic, events.MaxTopicName)
	}
	if len(m.Body) > events.MaxMessageBody {
		return fmt.Errorf("%w: body of %d bytes: at most %d (1 MiB); pass large data by reference", ErrInvalidCommand, len(m.Body), events.MaxMessageBody)
	}
	if !utf8.ValidString(m.Body) {
		return fmt.Errorf("%w: body is not UTF-8 text: encode binary data (base64) before publishing it", ErrInvalidCommand)
	}
	if len(m.Metadata) > 0 {
		if len(m.Metadata) > events.MaxMessageMetadata {
			return fmt.Errorf("%w: metadata of %d bytes: at most %d (16 KiB)", ErrInvalidCommand, len(m.Metadata), events.MaxMessageMetadata)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(m.Metadata, &obj); err != nil || obj == nil {
			return fmt.Errorf("%w: metadata must be a JSON object, e.g. {\"lang\":\"en\"}", ErrInvalidCommand)
		}
	}
	for name, v := range map[string]string{"message id": m.ID, "parent id": m.ParentID, "conversation id": m.ConversationID, "producer": m.Producer} {
		if len(v) > 200 {
			return fmt.Errorf("%w: %s of %d bytes: at most 200", ErrInvalidCommand, name, len(v))
		}
	}
	return nil
}

// publishIn decides a message's publication inside a decision: the parent
// must exist; the conversation is inherited from it when not given, or
// is the message's own id.
func publishIn(tx *ledger.Tx, m events.Message, actor events.Actor, listeners *TopicListeners) ([]ledger.NewEvent, events.Message, error) {
	if m.ParentID != "" {
		parent, err := LoadMessage(tx, m.ParentID)
		if err != nil {
			return nil, m, fmt.Errorf("parent: %w", err)
		}
		if m.ConversationID == "" {
			m.ConversationID = parent.Message.ConversationID
		}
	}
	if m.ConversationID == "" {
		m.ConversationID = m.ID
	}
	if actor == "" {
		actor = events.ActorCLI
	}
	ev := ledger.NewEvent{Stream: events.MessageStream(m.ID), ExpectedVersion: 0, Type: events.MessagePublished, Data: m,
		Meta: ledger.Meta{CorrelationID: m.ConversationID, CausationID: m.ParentID, Actor: actor}}
	more, err := listeners.listen(tx, m)
	if err != nil {
		return nil, m, err
	}
	return append([]ledger.NewEvent{ev}, more...), m, nil
}
