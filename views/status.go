package views

import (
	"context"
	"os"
	"path/filepath"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// LedgerSize is how much disk the ledger takes and how far the projector
// is behind it.
type LedgerSize struct {
	Database string `json:"database"`
	// FileBytes, WALBytes and ArchiveBytes are the database file, its
	// write-ahead log, and the archive files beside it.
	FileBytes    int64 `json:"file_bytes"`
	WALBytes     int64 `json:"wal_bytes"`
	ArchiveBytes int64 `json:"archive_bytes"`
	Head         int64 `json:"head"`
	Checkpoint   int64 `json:"projector_checkpoint"`
	// Lag is how many events the projections have not applied yet.
	Lag int64 `json:"projector_lag"`
}

// Status is the state of the queue and the ledger, as ductile system status
// shows it; every part is read in one read transaction, through indexes
// (its cost follows the queue, never the history).
type Status struct {
	Queue  QueueCounts     `json:"queue"`
	Ledger LedgerSize      `json:"ledger"`
	Health PluginHealthSet `json:"-"`
}

// ReadStatus reads the queue's counts, the ledger's size and head, the
// projector's checkpoint and every plugin's health.
func ReadStatus(ctx context.Context, l *ledger.Ledger) (Status, error) {
	st := Status{Ledger: LedgerSize{Database: l.Path()}}
	st.Ledger.FileBytes = fileSize(l.Path())
	st.Ledger.WALBytes = fileSize(l.Path() + "-wal")
	if archives, err := filepath.Glob(l.Path() + ".archive-*"); err == nil {
		for _, a := range archives {
			st.Ledger.ArchiveBytes += fileSize(a)
		}
	}
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		q, err := readQueue(conn, 1)
		if err != nil {
			return err
		}
		st.Queue = q.Counts
		if st.Ledger.Head, err = queries.MaxSeq(conn); err != nil {
			return err
		}
		if st.Ledger.Checkpoint, err = projections.CheckpointConn(conn); err != nil {
			return err
		}
		st.Ledger.Lag = max(0, st.Ledger.Head-st.Ledger.Checkpoint)
		st.Health, err = readPluginHealth(conn)
		return err
	})
	return st, err
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// Health is what a /healthz reads from the ledger (spec §10.3): jobs
// waiting to run, and the plugins with a circuit breaker not closed.
type Health struct {
	QueueDepth         int64
	PluginsCircuitOpen int
}

// ReadHealth reads Health in one read transaction, through indexes.
func ReadHealth(ctx context.Context, l *ledger.Ledger) (h Health, err error) {
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		q, err := readQueue(conn, 1)
		if err != nil {
			return err
		}
		h.QueueDepth = q.Counts.Queued
		open := map[string]bool{}
		err = queries.ListBreakers(conn, func(r queries.ListBreakersRow) error {
			if r.State != "closed" {
				open[r.Plugin] = true
			}
			return nil
		})
		h.PluginsCircuitOpen = len(open)
		return err
	})
	return h, err
}
