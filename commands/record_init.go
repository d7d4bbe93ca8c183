package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// InitRun is one finished run of a plugin's init command (spec §5.2):
// plugin.initialized if it succeeded, plugin.init_failed if not.
type InitRun struct {
	Plugin     string
	ConfigHash string // what the init ran for (daemon.InitConfigHash)
	Version    string // the manifest's version
	RunID      string // the job_id its request carried
	Outcome    events.Outcome
	Error      string
	ExitCode   int
	Stderr     string // the tail the event keeps
	Duration   time.Duration
	Actor      events.Actor // events.ActorDaemon when empty
}

// RecordInit appends the run to the plugin's health stream, durably. An
// init interrupted (outcome canceled) is not the plugin's answer: it is
// refused.
func RecordInit(ctx context.Context, l *ledger.Ledger, cmd InitRun) error {
	ev, err := cmd.decide()
	if err == nil {
		_, err = l.Append(ctx, ev)
	}
	if err != nil {
		return fmt.Errorf("record init of plugin %s: %w", cmd.Plugin, err)
	}
	return nil
}

func (cmd InitRun) decide() (ledger.NewEvent, error) {
	switch {
	case cmd.Plugin == "" || cmd.ConfigHash == "" || cmd.Outcome == "":
		return ledger.NewEvent{}, fmt.Errorf("%w: plugin, config hash and outcome are required", ErrInvalidCommand)
	case cmd.Outcome == events.OutcomeCanceled:
		return ledger.NewEvent{}, fmt.Errorf("%w: an interrupted init is not recorded (the next start runs it again)", ErrInvalidCommand)
	}
	actor := cmd.Actor
	if actor == "" {
		actor = events.ActorDaemon
	}
	ev := ledger.NewEvent{Stream: events.PluginHealthStream(cmd.Plugin), ExpectedVersion: ledger.AnyVersion, Meta: ledger.Meta{Actor: actor}}
	if cmd.Outcome == events.OutcomeOK {
		ev.Type = events.PluginInitialized
		ev.Data = events.InitializedData{ConfigHash: cmd.ConfigHash, Version: cmd.Version, RunID: cmd.RunID, DurationMS: cmd.Duration.Milliseconds()}
		return ev, nil
	}
	ev.Type = events.PluginInitFailed
	ev.Data = events.InitFailedData{ConfigHash: cmd.ConfigHash, Version: cmd.Version, RunID: cmd.RunID, Error: cmd.Error,
		Outcome: cmd.Outcome, ExitCode: cmd.ExitCode, Stderr: cmd.Stderr, DurationMS: cmd.Duration.Milliseconds()}
	return ev, nil
}
