package views

import (
	"context"
	"fmt"
	"os"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// LedgerStats summarises a ledger: its log, files, streams and event
// types, and how far the projector lags.
type LedgerStats struct {
	ledger.Stats
	Database   string      `json:"database"`
	FileBytes  int64       `json:"file_bytes"`
	WALBytes   int64       `json:"wal_bytes"`
	Streams    int64       `json:"streams"`
	Checkpoint int64       `json:"projector_checkpoint"`
	Lag        int64       `json:"projector_lag"`
	Types      []TypeCount `json:"types"`
	// Daemon and DaemonPID say whether a daemon runs on the ledger. Views
	// read the ledger only: the caller, who knows its state directory's
	// lock, fills them in.
	Daemon    bool     `json:"daemon_running"`
	DaemonPID int      `json:"daemon_pid,omitempty"`
	Warnings  []string `json:"warnings"`
}

// TypeCount is how many events of a type the log holds.
type TypeCount struct {
	Type  string `json:"type"`
	Count int64  `json:"count"`
}

// ReadLedgerStats reads l's stats. The counts and the checkpoint are read
// in one read transaction, so the lag is what it was at that moment
// (negative only if events the projections applied were removed from the
// log, which is then a warning, as is a damaged recorded head).
func ReadLedgerStats(ctx context.Context, l *ledger.Ledger) (*LedgerStats, error) {
	out := &LedgerStats{Database: l.Path(), Types: []TypeCount{}, Warnings: []string{}}
	if fi, err := os.Stat(l.Path()); err == nil {
		out.FileBytes = fi.Size()
	}
	if fi, err := os.Stat(l.Path() + "-wal"); err == nil {
		out.WALBytes = fi.Size()
	}
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		var err error
		if out.Stats, err = ledger.StatsConn(conn); err != nil {
			return err
		}
		if out.Streams, err = queries.CountStreams(conn); err != nil {
			return err
		}
		err = queries.CountEventTypes(conn, func(r queries.CountEventTypesRow) error {
			out.Types = append(out.Types, TypeCount{r.Type, r.Count})
			return nil
		})
		if err != nil {
			return err
		}
		out.Checkpoint, err = projections.CheckpointConn(conn)
		return err
	})
	if err != nil {
		return nil, err
	}
	out.Lag = out.LastSeq - out.Checkpoint
	if out.Lag < 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("the projector's checkpoint (seq %d) is past the log's head (seq %d): "+
			"events were removed from the ledger (see: ductile ledger verify)", out.Checkpoint, out.LastSeq))
	}
	head, err := l.CheckHead(ctx)
	if err != nil {
		return nil, err
	}
	if !head.OK() && out.Lag >= 0 {
		out.Warnings = append(out.Warnings, head.Problem+" (see: ductile ledger verify)")
	}
	return out, nil
}
