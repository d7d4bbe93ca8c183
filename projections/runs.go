package projections

import (
	"errors"
	"fmt"
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// Runs keeps one row per job as the Run protocol lists it (runs): its run
// status (dead splits into failed and timeout by its last attempt), task
// and trace ids, retry chain, last progress and export count: what GET
// /runs filters on, through the table's indexes. The full record of a run
// is folded from its stream (views.ReadRunRecord).
type Runs struct{}

func (Runs) Name() string { return "runs" }

// Apply applies one event: a page of one.
func (p Runs) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return p.applyPage(conn, newPage([]ledger.Event{ev}))
}

// runRow is a row of runs as a page changes it: loaded from the table (or
// created by the page) once, folded in memory, written once.
type runRow struct {
	queries.InsertRunRowParams
	stored bool // in the table: updated, not inserted
}

// runRows are the rows a page has touched, in the order it first did.
type runRows struct {
	conn *sqlite.Conn
	rows pendingRows[string, runRow]
}

func (r *runRows) write(row *runRow) error {
	var err error
	if row.stored {
		p := row.InsertRunRowParams
		err = queries.UpdateRunRow(r.conn, queries.UpdateRunRowParams{Status: p.Status, TimedOut: p.TimedOut, Progress: p.Progress,
			Stage: p.Stage, Message: p.Message, ExportsCount: p.ExportsCount, UpdatedSeq: p.UpdatedSeq, JobID: p.JobID})
	} else {
		err = queries.InsertRunRow(r.conn, row.InsertRunRowParams)
	}
	if err != nil {
		return fmt.Errorf("write run %s: %w", row.JobID, err)
	}
	return nil
}

// row is job id's row: the page's, else the table's (nil if it has none:
// a job this projection does not hold).
func (r *runRows) row(id string) (*runRow, error) {
	if row := r.rows.byKey[id]; row != nil {
		return row, nil
	}
	got, err := queries.GetRunRow(r.conn, id)
	if errors.Is(err, queries.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	row := &runRow{InsertRunRowParams: queries.InsertRunRowParams(got), stored: true}
	r.rows.add(id, row)
	return row, nil
}

// applyPage applies the page's events in order.
func (p Runs) applyPage(conn *sqlite.Conn, pg *page) error {
	r := &runRows{conn: conn}
	for i, ev := range pg.events {
		if err := p.apply(r, pg, i); err != nil {
			return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	return r.rows.flush(r.write)
}

// apply applies event i of pg to its run's row.
func (Runs) apply(r *runRows, pg *page, i int) error {
	ev := pg.events[i]
	id := events.JobIDFromStream(ev.Stream)
	if id == "" {
		if ev.Type == events.LedgerArchived {
			if err := r.rows.flush(r.write); err != nil {
				return err
			}
			return forgetArchived(r.conn, ev, queries.DeleteArchivedRuns)
		}
		return nil
	}
	if ev.Type == events.JobEnqueued {
		d, err := pg.decode(i)
		if err != nil {
			return err
		}
		e := d.(*events.Enqueued)
		if err := r.rows.flushOne(id, r.write); err != nil {
			return err // a second job.enqueued: refused as the insert one by one would be
		}
		r.rows.add(id, &runRow{InsertRunRowParams: queries.InsertRunRowParams{
			JobID: id, Seq: ev.Seq, Plugin: e.Plugin, Command: e.Command, Status: string(events.StatusQueued),
			TaskID: strPtr(e.TaskID), TraceID: strPtr(e.TraceID), RootJobID: strPtr(e.RootJobID), RunAttempt: int64(max(e.RunAttempt, 1)),
			UpdatedSeq: ev.Seq,
		}})
		return nil
	}
	switch ev.Type {
	case events.JobStarted, events.JobSucceeded, events.JobFailed, events.JobTimedOut, events.JobRetryScheduled, events.JobDead,
		events.JobRecovered, events.JobCancelRequested, events.JobCanceled, events.JobProgressed, events.JobExported:
	default:
		return nil // no change to a run's row
	}
	row, err := r.row(id)
	if err != nil || row == nil {
		return err
	}
	switch ev.Type {
	case events.JobStarted:
		row.Status, row.Progress, row.Stage, row.Message = string(events.StatusRunning), nil, nil, nil
	case events.JobSucceeded:
		row.Status, row.TimedOut = string(events.StatusSucceeded), 0
	case events.JobFailed:
		row.TimedOut = 0
	case events.JobTimedOut:
		row.TimedOut = 1
	case events.JobRetryScheduled:
		row.Status = string(events.StatusQueued)
	case events.JobRecovered:
		d, err := pg.decode(i)
		if err != nil {
			return err
		}
		row.TimedOut = 0
		if d.(*events.Recovered).Requeued {
			row.Status = string(events.StatusQueued)
		}
	case events.JobDead:
		row.Status = "failed"
		if row.TimedOut == 1 {
			row.Status = "timeout"
		}
	case events.JobCancelRequested:
		row.Status = string(events.StatusCancelRequested)
	case events.JobCanceled:
		row.Status = string(events.StatusCanceled)
	case events.JobProgressed:
		d, err := pg.decode(i)
		if err != nil {
			return err
		}
		p := d.(*events.Progressed)
		row.Progress, row.Stage, row.Message = p.Progress, strPtr(p.Stage), strPtr(p.Message)
	case events.JobExported:
		row.ExportsCount++
	}
	row.UpdatedSeq = ev.Seq
	return nil
}

// Reset empties runs.
func (Runs) Reset(conn *sqlite.Conn) error { return queries.DeleteRuns(conn) }

// Dump writes runs' rows in seq order.
func (Runs) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpRuns(conn, func(r queries.DumpRunsRow) error { return dumpRow(w, r) })
}
