package commands

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ductile/ductile/events"
)

// checkContext refuses a job context that is not a JSON object (absent and
// null are none).
func checkContext(ctx json.RawMessage) error {
	t := strings.TrimSpace(string(ctx))
	if t == "" || t == "null" {
		return nil
	}
	if t[0] != '{' || !json.Valid(ctx) {
		return fmt.Errorf("%w: context must be a JSON object", ErrInvalidCommand)
	}
	if d := events.JSONDepth(ctx); d > MaxPayloadDepth {
		return fmt.Errorf("%w: context nests %d levels deep; it may nest at most %d", ErrInvalidCommand, d, MaxPayloadDepth)
	}
	return nil
}

// storedContext is a job's context as job.enqueued stores it: absent when
// empty or null, else compact.
func storedContext(ctx json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(ctx))
	if t == "" || t == "null" {
		return nil
	}
	out, err := asStored(ctx)
	if err != nil {
		return ctx // checked valid already
	}
	return out
}
