package engine

import (
	"context"
	"fmt"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Publish records a message (message.published) and returns it as
// recorded: its id (a new UUIDv7) and conversation filled in. A parent
// that does not exist is commands.ErrMessageNotFound (code not_found); a
// bad topic, body or metadata commands.ErrInvalidCommand. DryRun checks
// and builds the message (the parent looked up) and records nothing.
func (e *Engine) Publish(ctx context.Context, p Publish) (events.Message, error) {
	actor := p.Actor
	if actor == "" {
		actor = events.ActorCLI
	}
	m, err := commands.PublishMessage(ctx, e.ledger, commands.Publish{Topic: p.Topic, Body: p.Body, ParentID: p.ParentID,
		ConversationID: p.ConversationID, Producer: p.Producer, Metadata: p.Metadata, Actor: actor, Now: e.fleet.Now(), DryRun: p.DryRun,
		Listeners: e.topicListeners()})
	if err != nil {
		return events.Message{}, fmt.Errorf("publish to %s: %w", p.Topic, err)
	}
	return m, nil
}

// topicListeners are the routes and pipelines of this config that listen
// on topics (from: topic:<name>, on: topic:<name>).
func (e *Engine) topicListeners() *commands.TopicListeners {
	return &commands.TopicListeners{Pipelines: e.pipelines, CanRun: e.CannotRun}
}
