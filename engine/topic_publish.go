package engine

import (
	"context"
	"errors"

	"github.com/ductile/ductile/events"
)

// errTopicsNotBuilt is returned by the topic exchange's methods until
// they are built.
var errTopicsNotBuilt = errors.New("the topic exchange is not built yet")

// Publish records a message (message.published) and returns it.
func (e *Engine) Publish(ctx context.Context, p Publish) (events.Message, error) {
	return events.Message{}, errTopicsNotBuilt
}
