package projections

import (
	"context"
	"errors"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// checkpointName is the projector's row in projector_checkpoint.
const checkpointName = "main"

// pageSize is how many events apply hands the projections at once: a job
// whose events all fall in one page is written once, complete (page.go).
const pageSize = 4096

// apply folds events after < seq <= until into ps, a page at a time, and
// moves the checkpoint (seq and hash of the last event applied), returning
// the new checkpoint. The caller owns the transaction. Events an archive
// holds (a rebuild after ledger archive) are read from its file.
func apply(conn *sqlite.Conn, ps []Projection, after, until int64, observe func(ledger.Event)) (int64, error) {
	last := after
	var lastHash []byte
	buf := make([]ledger.Event, 0, min(pageSize, max(until-after, 0)))
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := applyPage(conn, ps, newPage(buf))
		buf = buf[:0]
		return err
	}
	err := ledger.ReadLog(conn, after, until, func(ev ledger.Event) error {
		if observe != nil {
			observe(ev)
		}
		last, lastHash = ev.Seq, ev.Hash
		buf = append(buf, ev)
		if len(buf) == pageSize {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return after, err
	}
	if last != after {
		if err := queries.SetCheckpoint(conn, queries.SetCheckpointParams{Name: checkpointName, Seq: last, Hash: lastHash}); err != nil {
			return after, fmt.Errorf("move checkpoint to %d: %w", last, err)
		}
	}
	return last, nil
}

// CheckpointConn reads the projector's checkpoint on conn, inside whatever
// read transaction the caller holds (0 before any projection).
func CheckpointConn(conn *sqlite.Conn) (int64, error) {
	seq, err := queries.GetCheckpoint(conn, checkpointName)
	if errors.Is(err, queries.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read checkpoint: %w", err)
	}
	return seq, nil
}

// ReadCheckpoint reads the stored checkpoint through a read connection.
func ReadCheckpoint(ctx context.Context, l *ledger.Ledger) (seq int64, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		seq, err = CheckpointConn(conn)
		return err
	})
	return seq, err
}
