package commands

import (
	"context"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// ArchiveLedger moves the log's events recorded before a time to an archive
// file (ledger.Archive), no further than Cut allows, and records it with
// ledger.archived.
type ArchiveLedger struct {
	Before time.Time
	// Cut lowers the last seq archived so that what a decision reads whole
	// stays whole (views.ArchiveCut; required). It reads the projections,
	// so the read side gives it.
	Cut      func(conn *sqlite.Conn, through int64) (int64, string, error)
	DryRun   bool
	Actor    events.Actor
	Progress func(copied, total int64)
	// AfterFileWritten is ledger.ArchiveOptions' fault point, for crash tests.
	AfterFileWritten func(path string) error
}

// Run archives (or with DryRun only plans) and returns the plan and the
// archive made (zero if none).
func (cmd ArchiveLedger) Run(ctx context.Context, l *ledger.Ledger) (ledger.ArchivePlan, ledger.Archive, error) {
	if cmd.Cut == nil {
		return ledger.ArchivePlan{}, ledger.Archive{}, fmt.Errorf("archive ledger: %w: a cut (views.ArchiveCut) is required", ErrInvalidCommand)
	}
	actor := cmd.Actor
	if actor == "" {
		actor = events.ActorCLI
	}
	opts := ledger.ArchiveOptions{
		Before:           cmd.Before,
		Cut:              cmd.Cut,
		ForgetVersionsOf: []string{events.JobStream(""), events.RunStream("")},
		Progress:         cmd.Progress,
		AfterFileWritten: cmd.AfterFileWritten,
		Event: func(a ledger.Archive) ledger.NewEvent {
			return ledger.NewEvent{
				Stream: events.LedgerStream, ExpectedVersion: ledger.AnyVersion, Type: events.LedgerArchived,
				Data: events.LedgerArchivedData{
					File: a.File, FirstSeq: a.FirstSeq, LastSeq: a.LastSeq, Events: a.Events,
					PrevHash: a.PrevHash, LastHash: a.LastHash, ContentHash: a.ContentHash,
					Before: cmd.Before.UTC().Format(time.RFC3339Nano),
				},
				Meta: ledger.Meta{Actor: actor},
			}
		},
	}
	if cmd.DryRun {
		plan, err := l.PlanArchive(ctx, opts)
		return plan, ledger.Archive{}, err
	}
	plan, a, err := l.Archive(ctx, opts)
	if err != nil {
		return plan, a, fmt.Errorf("archive ledger: %w", err)
	}
	return plan, a, nil
}
