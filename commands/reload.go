package commands

import (
	"context"
	"fmt"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// ReloadRequest asks the daemon PID to reload its config
// (config.reload_requested); it answers every request up to the seq its
// reload began at with config.applied or config.reload_failed.
type ReloadRequest struct {
	PID   int  // the daemon asked
	Force bool // apply a config whose only errors are of the plugins
	Actor events.Actor
}

// RequestReload appends the request to the system stream, durably, and
// returns its seq: the caller then wakes the daemon (SIGHUP) and waits for
// an answer after it.
func RequestReload(ctx context.Context, l *ledger.Ledger, cmd ReloadRequest) (int64, error) {
	if cmd.PID <= 0 {
		return 0, fmt.Errorf("request reload: %w: the daemon's pid is required", ErrInvalidCommand)
	}
	actor := cmd.Actor
	if actor == "" {
		actor = events.ActorCLI
	}
	seqs, err := l.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion,
		Type: events.ConfigReloadRequested, Data: events.ReloadRequestedData{PID: cmd.PID, Force: cmd.Force}, Meta: ledger.Meta{Actor: actor}})
	if err != nil {
		return 0, fmt.Errorf("request reload: %w", err)
	}
	return seqs[0], nil
}

// RecordReloadFailed appends config.reload_failed to the system stream,
// durably: the daemon f.PID refused a reload and keeps its config.
func RecordReloadFailed(ctx context.Context, l *ledger.Ledger, f events.ReloadFailedData) error {
	if f.PID <= 0 || f.Error == "" {
		return fmt.Errorf("record failed reload: %w: the daemon's pid and the error are required", ErrInvalidCommand)
	}
	_, err := l.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion,
		Type: events.ConfigReloadFailed, Data: f, Meta: ledger.Meta{Actor: events.ActorDaemon}})
	if err != nil {
		return fmt.Errorf("record failed reload: %w", err)
	}
	return nil
}
