package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// PruneLogs asks for the job logs of jobs that ended before Before to be
// pruned: it records log.pruned, which the job_log projection applies.
type PruneLogs struct {
	Before    time.Time
	Retention time.Duration // the retention that made Before, if one did
	Jobs      int64         // how many jobs' logs the caller counted
	By        events.Actor  // events.ActorDaemon or events.ActorCLI
}

// PruneJobLogs appends log.pruned to the system stream, durably.
func PruneJobLogs(ctx context.Context, l *ledger.Ledger, cmd PruneLogs) (int64, error) {
	if cmd.Before.IsZero() || cmd.By == "" {
		return 0, fmt.Errorf("prune job logs: %w: before and by are required", ErrInvalidCommand)
	}
	data := events.LogPrunedData{Before: cmd.Before.UTC().Format(ledger.TimeFormat), Jobs: cmd.Jobs, By: cmd.By}
	if cmd.Retention > 0 {
		data.Retention = cmd.Retention.String()
	}
	seqs, err := l.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion,
		Type: events.LogPruned, Data: data, Meta: ledger.Meta{Actor: cmd.By}})
	if err != nil {
		return 0, fmt.Errorf("prune job logs: %w", err)
	}
	return seqs[0], nil
}
