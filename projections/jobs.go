package projections

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// JobQueue keeps one row per job: its current status and attempt, the
// dispatcher's view of the queue (spec §12 job_queue), with what the Run
// protocol lists of it as a run (task and trace ids, retry chain, whether
// its last ended attempt timed out, last progress, export count:
// migration 00021); and job_totals, how
// many jobs of each plugin reached each terminal status, archived ones
// included (ledger.archived removes job rows, never totals).
type JobQueue struct{}

func (JobQueue) Name() string { return "job_queue" }

// Apply applies one event: a page of one (applyPage).
func (q JobQueue) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return q.applyPage(conn, newPage([]ledger.Event{ev}))
}

// totalKey names a row of job_totals.
type totalKey struct {
	plugin string
	status events.Status
}

// jobRows are the job_queue rows a page is building: each job the page
// enqueues is folded into one row in memory and written once, complete,
// instead of inserted and then updated event by event; and the jobs that
// reach a terminal status, added up into one addition per job_totals row.
type jobRows struct {
	conn   *sqlite.Conn
	rows   pendingRows[string, queries.InsertJobRowParams]
	totals pendingRows[totalKey, queries.AddJobTotalParams]
}

func (r *jobRows) write(row *queries.InsertJobRowParams) error {
	if err := queries.InsertJobRow(r.conn, *row); err != nil {
		return fmt.Errorf("insert job %s: %w", row.ID, err)
	}
	return nil
}

// finished counts a job of plugin that reached status.
func (r *jobRows) finished(plugin string, status events.Status) {
	k := totalKey{plugin, status}
	if t := r.totals.byKey[k]; t != nil {
		t.N++
		return
	}
	r.totals.add(k, &queries.AddJobTotalParams{Plugin: plugin, Status: string(status), N: 1})
}

// flush writes what the page built.
func (r *jobRows) flush() error {
	if err := r.rows.flush(r.write); err != nil {
		return err
	}
	return r.totals.flush(func(t *queries.AddJobTotalParams) error { return queries.AddJobTotal(r.conn, *t) })
}

// applyPage applies the page's events in order, each by apply.
func (q JobQueue) applyPage(conn *sqlite.Conn, pg *page) error {
	r := &jobRows{conn: conn}
	for i, ev := range pg.events {
		if err := q.apply(r, pg, i); err != nil {
			return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	return r.flush()
}

// apply applies event i of pg to its job's row: the row the page is
// building if the page enqueued the job, else the table's.
func (JobQueue) apply(r *jobRows, pg *page, i int) error {
	conn, ev := r.conn, pg.events[i]
	id := events.JobIDFromStream(ev.Stream)
	if id == "" {
		if ev.Type == events.LedgerArchived {
			// It forgets every job the page enqueued before it.
			if err := r.rows.flush(r.write); err != nil {
				return err
			}
			return forgetArchived(conn, ev, queries.DeleteArchivedJobs)
		}
		return nil
	}
	row := r.rows.byKey[id]
	var d any
	switch ev.Type {
	case events.JobSucceeded, events.JobCancelRequested, events.JobExported: // nothing of their data
	default:
		var err error
		if d, err = pg.decode(i); err != nil {
			return err
		}
		if d == nil {
			return nil // not an event of job_queue
		}
	}
	at := ev.RecordedAtText()
	switch ev.Type {
	case events.JobEnqueued:
		e := d.(*events.Enqueued)
		meta, err := decodeMeta(ev)
		if err != nil {
			return err
		}
		if row != nil {
			// A second job.enqueued: the first row is written, and the
			// second refused, as their inserts one by one would be.
			if err := r.rows.flushOne(id, r.write); err != nil {
				return err
			}
		}
		r.rows.add(id, &queries.InsertJobRowParams{
			ID: id, Seq: ev.Seq, Plugin: e.Plugin, Command: e.Command, Payload: rawPtr(e.Payload),
			Status: string(events.StatusQueued), Attempt: 1, MaxAttempts: int64(e.MaxAttempts), SubmittedBy: string(e.SubmittedBy),
			DedupeKey: strPtr(e.DedupeKey), CreatedAt: at, ParentJobID: strPtr(e.ParentJobID),
			SourceEventID: strPtr(e.SourceEventID), CorrelationID: meta.CorrelationID, UpdatedSeq: ev.Seq,
			TaskID: strPtr(e.TaskID), TraceID: strPtr(e.TraceID), RootJobID: strPtr(e.RootJobID), RunAttempt: int64(max(e.RunAttempt, 1)),
		})
		return nil
	case events.JobStarted:
		attempt := int64(d.(*events.Started).Attempt)
		if row == nil {
			return queries.SetJobStarted(conn, queries.SetJobStartedParams{Attempt: attempt, At: &at, Seq: ev.Seq, ID: id})
		}
		row.Status, row.Attempt, row.StartedAt, row.NextRetryAt = string(events.StatusRunning), attempt, &at, nil
		row.Progress, row.Stage, row.Message = nil, nil, nil
	case events.JobSucceeded:
		return r.ended(row, id, events.StatusSucceeded, ev, nil)
	case events.JobFailed, events.JobTimedOut:
		lastError := strPtr(d.(*events.AttemptEnded).Error)
		timedOut := int64(0)
		if ev.Type == events.JobTimedOut {
			timedOut = 1
		}
		if row == nil {
			return queries.SetJobLastError(conn, queries.SetJobLastErrorParams{LastError: lastError, TimedOut: timedOut, Seq: ev.Seq, ID: id})
		}
		row.LastError, row.TimedOut = lastError, timedOut
	case events.JobRetryScheduled:
		e := d.(*events.RetryScheduled)
		next := e.NextRetryAt
		if row == nil {
			return queries.SetJobRetry(conn, queries.SetJobRetryParams{Attempt: int64(e.Attempt), NextRetryAt: &next, MaxAttempts: int64(e.MaxAttempts), Seq: ev.Seq, ID: id})
		}
		row.Status, row.Attempt, row.NextRetryAt = string(events.StatusQueued), int64(e.Attempt), &next
		if e.MaxAttempts > 0 {
			row.MaxAttempts = int64(e.MaxAttempts)
		}
	case events.JobDead:
		reason := strPtr(d.(*events.Dead).Reason)
		if row == nil {
			if err := queries.SetJobDead(conn, queries.SetJobDeadParams{At: &at, Reason: reason, Seq: ev.Seq, ID: id}); err != nil {
				return err
			}
			return r.countFinished(id, events.StatusDead)
		}
		row.Status, row.CompletedAt, row.NextRetryAt = string(events.StatusDead), &at, nil
		if row.LastError == nil {
			row.LastError = reason
		}
		r.finished(row.Plugin, events.StatusDead)
	case events.JobRecovered:
		e := d.(*events.Recovered)
		reason := e.Reason
		switch {
		case row != nil:
			if e.Requeued {
				row.Status = string(events.StatusQueued)
			}
			row.Attempt, row.LastError, row.TimedOut = int64(e.NextAttempt), &reason, 0
		case e.Requeued:
			return queries.SetJobQueued(conn, queries.SetJobQueuedParams{Attempt: int64(e.NextAttempt), LastError: &reason, Seq: ev.Seq, ID: id})
		default:
			return queries.SetJobAttempt(conn, queries.SetJobAttemptParams{Attempt: int64(e.NextAttempt), LastError: &reason, Seq: ev.Seq, ID: id})
		}
	case events.JobCancelRequested:
		if row == nil {
			return queries.SetJobStatus(conn, queries.SetJobStatusParams{Status: string(events.StatusCancelRequested), Seq: ev.Seq, ID: id})
		}
		row.Status = string(events.StatusCancelRequested)
	case events.JobCanceled:
		return r.ended(row, id, events.StatusCanceled, ev, strPtr(d.(*events.Canceled).Reason))
	case events.JobProgressed:
		p := d.(*events.Progressed)
		if row == nil {
			return queries.SetJobProgress(conn, queries.SetJobProgressParams{Progress: p.Progress, Stage: strPtr(p.Stage), Message: strPtr(p.Message), Seq: ev.Seq, ID: id})
		}
		row.Progress, row.Stage, row.Message = p.Progress, strPtr(p.Stage), strPtr(p.Message)
	case events.JobExported:
		if row == nil {
			return queries.AddJobExport(conn, queries.AddJobExportParams{Seq: ev.Seq, ID: id})
		}
		row.ExportsCount++
	default:
		return nil // read by other projections
	}
	row.UpdatedSeq = ev.Seq
	return nil
}

// ended ends job id's row (row, if the page is building it) in a terminal
// status other than dead, and counts it. Its end is no timeout (timed_out
// 0), whatever an earlier attempt's was.
func (r *jobRows) ended(row *queries.InsertJobRowParams, id string, status events.Status, ev ledger.Event, lastError *string) error {
	at := ev.RecordedAtText()
	if row == nil {
		if err := queries.SetJobEnded(r.conn, queries.SetJobEndedParams{Status: string(status), At: &at, LastError: lastError, Seq: ev.Seq, ID: id}); err != nil {
			return err
		}
		return r.countFinished(id, status)
	}
	row.Status, row.CompletedAt, row.LastError, row.NextRetryAt, row.UpdatedSeq = string(status), &at, lastError, nil, ev.Seq
	row.TimedOut = 0
	r.finished(row.Plugin, status)
	return nil
}

// countFinished counts job id, in the table, which reached status (a job
// job_queue does not hold is not counted, as its row was not ended).
func (r *jobRows) countFinished(id string, status events.Status) error {
	plugin, err := queries.GetJobPlugin(r.conn, id)
	if errors.Is(err, queries.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	r.finished(plugin, status)
	return nil
}

// Reset empties job_queue and job_totals.
func (JobQueue) Reset(conn *sqlite.Conn) error {
	if err := queries.DeleteJobQueue(conn); err != nil {
		return err
	}
	return queries.DeleteJobTotals(conn)
}

// Dump writes job_queue's rows, then job_totals' under their own heading.
func (JobQueue) Dump(conn *sqlite.Conn, w io.Writer) error {
	if err := queries.DumpJobQueue(conn, func(r queries.DumpJobQueueRow) error { return dumpRow(w, r) }); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "## job_totals\n"); err != nil {
		return err
	}
	return queries.ListJobTotals(conn, func(r queries.ListJobTotalsRow) error { return dumpRow(w, r) })
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func rawPtr(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}
