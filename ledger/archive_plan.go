package ledger

import (
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/queries"
)

// ArchivePlan is what an archive would move.
type ArchivePlan struct {
	Before     string `json:"before"`
	Head       int64  `json:"head"`              // the log's newest seq
	Anchor     int64  `json:"anchor"`            // the newest seq already archived (0: none)
	Candidate  int64  `json:"candidate"`         // the last seq such that it and every earlier event were recorded before Before
	Through    int64  `json:"through"`           // the last seq that moves (Anchor: nothing moves)
	Lowered    string `json:"lowered,omitempty"` // why Through is below Candidate
	Events     int64  `json:"events"`
	JobStreams int64  `json:"jobs"`
	Bytes      int64  `json:"bytes"` // about what the events hold
	File       string `json:"file,omitempty"`
}

// PlanArchive says what Archive would move, without moving anything.
func (l *Ledger) PlanArchive(ctx context.Context, opts ArchiveOptions) (ArchivePlan, error) {
	var plan ArchivePlan
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) (err error) {
		plan, err = planArchive(conn, l.path, opts)
		return err
	})
	return plan, err
}

func planArchive(conn *sqlite.Conn, dbPath string, opts ArchiveOptions) (ArchivePlan, error) {
	plan := ArchivePlan{Before: opts.Before.UTC().Format(TimeFormat)}
	anchor, err := anchorConn(conn)
	if err != nil {
		return plan, err
	}
	head, err := readHead(conn)
	if err != nil {
		return plan, err
	}
	plan.Head, plan.Anchor, plan.Through = head.seq, anchor.seq, anchor.seq
	first, err := queries.FirstSeqAtOrAfter(conn, plan.Before)
	if err != nil {
		return plan, fmt.Errorf("plan archive: %w", err)
	}
	plan.Candidate = head.seq
	if first > 0 {
		plan.Candidate = first - 1
	}
	through := plan.Candidate
	// The projections must have applied what moves: the projector reads
	// only the main file.
	err = queries.ListCheckpoints(conn, func(r queries.ListCheckpointsRow) error {
		if r.Seq < through {
			through = r.Seq
			plan.Lowered = fmt.Sprintf("the projections have applied events up to seq %d only (start the daemon to let them catch up)", r.Seq)
		}
		return nil
	})
	if err != nil {
		return plan, fmt.Errorf("plan archive: %w", err)
	}
	if opts.Cut != nil && through > anchor.seq {
		cut, why, err := opts.Cut(conn, through)
		if err != nil {
			return plan, fmt.Errorf("plan archive: %w", err)
		}
		if cut < through {
			through, plan.Lowered = cut, why
		}
	}
	if through <= anchor.seq {
		return plan, nil
	}
	plan.Through = through
	size, err := queries.RangeSize(conn, queries.RangeSizeParams{AfterSeq: anchor.seq, UntilSeq: through})
	if err != nil {
		return plan, fmt.Errorf("plan archive: %w", err)
	}
	plan.Events, plan.Bytes, plan.JobStreams = size.Events, size.Bytes, size.JobStreams
	plan.File = ArchivePath(dbPath, anchor.seq+1, through)
	return plan, nil
}
