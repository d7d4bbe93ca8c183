package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// HealthCheck is one finished run of a plugin's health command (spec §5.2),
// recorded as plugin.health_checked.
type HealthCheck struct {
	Plugin   string
	Status   events.HealthStatus // healthy or unhealthy
	Message  string
	Outcome  events.Outcome
	RunID    string // the job_id its request carried
	Duration time.Duration
	Actor    events.Actor // events.ActorCLI when empty
}

// RecordHealth appends the check to the plugin's health stream, durably.
func RecordHealth(ctx context.Context, l *ledger.Ledger, cmd HealthCheck) error {
	ev, err := cmd.decide()
	if err == nil {
		_, err = l.Append(ctx, ev)
	}
	if err != nil {
		return fmt.Errorf("record health of plugin %s: %w", cmd.Plugin, err)
	}
	return nil
}

func (cmd HealthCheck) decide() (ledger.NewEvent, error) {
	if cmd.Plugin == "" || cmd.Outcome == "" {
		return ledger.NewEvent{}, fmt.Errorf("%w: plugin and outcome are required", ErrInvalidCommand)
	}
	if cmd.Status != events.Healthy && cmd.Status != events.Unhealthy {
		return ledger.NewEvent{}, fmt.Errorf("%w: status %q is not recorded (healthy or unhealthy)", ErrInvalidCommand, cmd.Status)
	}
	actor := cmd.Actor
	if actor == "" {
		actor = events.ActorCLI
	}
	return ledger.NewEvent{Stream: events.PluginHealthStream(cmd.Plugin), ExpectedVersion: ledger.AnyVersion, Type: events.PluginHealthChecked,
		Data: events.HealthCheckedData{Status: cmd.Status, Message: cmd.Message, Outcome: cmd.Outcome, RunID: cmd.RunID, DurationMS: cmd.Duration.Milliseconds()},
		Meta: ledger.Meta{Actor: actor}}, nil
}
