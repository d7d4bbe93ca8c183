package commands

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// SeedState gives a plugin, in a fresh ledger, the state it has in
// another: from is that ledger's newest event of the plugin's stream
// (plugin.state_merged or plugin.fact_recorded), appended here as it is,
// so that the plugin's next request carries the same state. A sandbox's
// scratch ledger is seeded so (pipeline dry-run --step).
func SeedState(ctx context.Context, l *ledger.Ledger, from ledger.Event) error {
	if from.Type != events.PluginStateMerged && from.Type != events.PluginFactRecorded {
		return fmt.Errorf("seed state: %w: %s is not a state event", ErrInvalidCommand, from.Type)
	}
	_, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		return []ledger.NewEvent{{Stream: from.Stream, ExpectedVersion: 0, Type: from.Type, Data: json.RawMessage(from.Data),
			Meta: ledger.Meta{Actor: events.ActorCLI}}}, nil
	})
	if err != nil {
		return fmt.Errorf("seed state: %w", err)
	}
	return nil
}
