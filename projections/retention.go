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
