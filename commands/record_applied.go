package commands

import (
	"context"
	"fmt"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// RecordApplied appends config.applied to the system stream, durably: from
// its seq on, the daemon a.PID runs with a (on start, or a reload it
// applied). It returns that seq.
func RecordApplied(ctx context.Context, l *ledger.Ledger, a events.ConfigAppliedData) (int64, error) {
	if a.PID <= 0 || (a.Reason != "start" && a.Reason != "reload") {
		return 0, fmt.Errorf("record applied config: %w: the daemon's pid and a reason (start or reload) are required", ErrInvalidCommand)
	}
	seqs, err := l.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion,
		Type: events.ConfigApplied, Data: a, Meta: ledger.Meta{Actor: events.ActorDaemon}})
	if err != nil {
		return 0, fmt.Errorf("record applied config: %w", err)
	}
	return seqs[0], nil
}
