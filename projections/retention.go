package projections

import (
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// prune applies log.pruned to job_log: the rows of every job terminal as
// of the event (its job_queue row last changed before it) that completed
// before the event's cutoff go. It reads job_queue as the attempts' rows
// do (applied first, and a terminal job's row no longer changes), so a
// replay, event by event or a page at a time, deletes the same rows.
func prune(conn *sqlite.Conn, ev ledger.Event) error {
	var d events.LogPrunedData
	if err := decodeData(ev.Data, &d); err != nil {
		return err
	}
	return queries.DeletePrunedJobLog(conn, queries.DeletePrunedJobLogParams{Before: d.Before, Seq: ev.Seq})
}

// forgetArchived applies ledger.archived with del (one table's delete): the
// jobs whose events moved to an archive file leave the projections, so
// that job list shows no job that job inspect could not find. Each table
// keeps the seq the rows began at, so a replay deletes the same rows.
func forgetArchived(conn *sqlite.Conn, ev ledger.Event, del func(*sqlite.Conn, int64) error) error {
	var d events.LedgerArchivedData
	if err := decodeData(ev.Data, &d); err != nil {
		return err
	}
	return del(conn, d.LastSeq)
}
