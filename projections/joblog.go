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

// JobLog keeps one row per attempt: the plugin's response, stderr, exit
// code and timings (spec §12 job_log, per attempt).
type JobLog struct{}

func (JobLog) Name() string { return "job_log" }

// Apply applies one event: a page of one (applyPage).
func (l JobLog) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return l.applyPage(conn, newPage([]ledger.Event{ev}))
}

func (JobLog) Reset(conn *sqlite.Conn) error { return queries.DeleteJobLog(conn) }

func (JobLog) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpJobLog(conn, func(r queries.DumpJobLogRow) error { return dumpRow(w, r) })
}

// attemptKey names a row of job_log.
type attemptKey struct {
	job     string
	attempt int64
}

// attemptRows are the job_log rows a page is building: each attempt the
// page starts is folded into one row in memory and written once, complete,
// instead of inserted and then updated event by event.
type attemptRows struct {
	conn *sqlite.Conn
	rows pendingRows[attemptKey, queries.InsertJobLogRowParams]
	// jobs are the jobs the page enqueued, with the columns an attempt's
	// row copies from job_queue (fixed once enqueued).
	jobs map[string]queries.GetJobForLogRow
}

func (r *attemptRows) write(row *queries.InsertJobLogRowParams) error {
	if err := queries.InsertJobLogRow(r.conn, *row); err != nil {
		return fmt.Errorf("insert attempt %d of job %s: %w", row.Attempt, row.JobID, err)
	}
	return nil
}

// applyPage applies the page's events in order, each by apply.
func (l JobLog) applyPage(conn *sqlite.Conn, pg *page) error {
	r := &attemptRows{conn: conn, jobs: map[string]queries.GetJobForLogRow{}}
	for i, ev := range pg.events {
		if err := l.apply(r, pg, i); err != nil {
			return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	return r.rows.flush(r.write)
}

// apply applies event i of pg to its attempt's row: the row the page is
// building if the page started the attempt, else the table's.
func (JobLog) apply(r *attemptRows, pg *page, i int) error {
	conn, ev := r.conn, pg.events[i]
	id := events.JobIDFromStream(ev.Stream)
	if id == "" {
		switch ev.Type {
		case events.LogPruned:
			// The prune sees every attempt the page started before it.
			if err := r.rows.flush(r.write); err != nil {
				return err
			}
			return prune(conn, ev)
		case events.LedgerArchived:
			if err := r.rows.flush(r.write); err != nil {
				return err
			}
			return forgetArchived(conn, ev, queries.DeleteArchivedJobLog)
		}
		return nil
	}
	switch ev.Type {
	case events.JobEnqueued, events.JobStarted, events.JobSucceeded, events.JobFailed, events.JobTimedOut, events.JobRecovered, events.JobCanceled:
	default:
		return nil // nothing of job_log
	}
	d, err := pg.decode(i)
	if err != nil {
		return err
	}
	at, seq := ev.RecordedAtText(), ev.Seq
	if e, ok := d.(*events.Enqueued); ok {
		r.jobs[id] = queries.GetJobForLogRow{Plugin: e.Plugin, Command: e.Command, SubmittedBy: string(e.SubmittedBy), CreatedAt: at,
			ParentJobID: strPtr(e.ParentJobID), SourceEventID: strPtr(e.SourceEventID)}
		return nil
	}
	key := attemptKey{id, int64(attemptOf(d))}
	row := r.rows.byKey[key]
	switch ev.Type {
	case events.JobStarted:
		j, ok := r.jobs[id]
		if !ok {
			// Read, then insert: an INSERT … SELECT may write several rows, so
			// SQLite keeps a statement journal of every page it changes (a
			// tenth of the daemon's writer CPU per job).
			j, err = queries.GetJobForLog(conn, id)
			if errors.Is(err, queries.ErrNoRows) {
				return nil // no such job: no attempt to log
			}
			if err != nil {
				return err
			}
		}
		if row != nil {
			// A second job.started of one attempt: the first row is
			// written, and the second refused, as their inserts one by one
			// would be.
			if err := r.rows.flushOne(key, r.write); err != nil {
				return err
			}
		}
		r.rows.add(key, &queries.InsertJobLogRowParams{
			JobID: id, Attempt: key.attempt, Plugin: j.Plugin, Command: j.Command, Status: string(events.AttemptRunning),
			SubmittedBy: j.SubmittedBy, CreatedAt: j.CreatedAt, StartedAt: at, ParentJobID: j.ParentJobID,
			SourceEventID: j.SourceEventID, StartedSeq: seq,
		})
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
		e := d.(*events.AttemptEnded)
		status := string(attemptStatus(ev.Type))
		exit, dur := int64(e.ExitCode), e.DurationMS
		truncated := int64(0)
		if e.StderrTruncated {
			truncated = 1
		}
		if row == nil {
			return queries.EndJobLog(conn, queries.EndJobLogParams{
				Status: status, Kind: strPtr(string(e.Kind)), Result: rawPtr(e.Response), Stdout: strPtr(e.Stdout),
				Stderr: strPtr(e.Stderr), StderrTruncated: truncated, LastError: strPtr(e.Error), ExitCode: &exit,
				At: &at, DurationMs: &dur, Seq: &seq, JobID: id, Attempt: key.attempt,
			})
		}
		row.Status, row.Kind, row.Result, row.Stdout, row.Stderr = status, strPtr(string(e.Kind)), rawPtr(e.Response), strPtr(e.Stdout), strPtr(e.Stderr)
		row.StderrTruncated, row.LastError, row.ExitCode, row.CompletedAt, row.DurationMs, row.EndedSeq = truncated, strPtr(e.Error), &exit, &at, &dur, &seq
	case events.JobRecovered:
		reason := d.(*events.Recovered).Reason
		if row == nil {
			return queries.SetJobLogStatus(conn, queries.SetJobLogStatusParams{Status: string(events.AttemptRecovered), LastError: &reason, At: &at, Seq: &seq, JobID: id, Attempt: key.attempt})
		}
		row.Status, row.LastError, row.CompletedAt, row.EndedSeq = string(events.AttemptRecovered), &reason, &at, &seq
	case events.JobCanceled:
		reason := strPtr(d.(*events.Canceled).Reason)
		if row == nil {
			// Only an attempt that was running has a row; a queued job has none.
			return queries.CancelJobLog(conn, queries.CancelJobLogParams{LastError: reason, At: &at, Seq: &seq, JobID: id, Attempt: key.attempt})
		}
		if row.Status == string(events.AttemptRunning) { // as CancelJobLog
			row.Status, row.LastError, row.CompletedAt, row.EndedSeq = string(events.AttemptCanceled), reason, &at, &seq
		}
	}
	return nil
}

// attemptOf is the attempt an event's decoded data names.
func attemptOf(d any) int {
	switch d := d.(type) {
	case *events.Started:
		return d.Attempt
	case *events.AttemptEnded:
		return d.Attempt
	case *events.Recovered:
		return d.Attempt
	case *events.Canceled:
		return d.Attempt
	}
	return 0
}

// attemptStatus is how job_log shows an attempt that ended with an event of
// type typ (job.succeeded, job.failed or job.timed_out).
func attemptStatus(typ string) events.AttemptStatus {
	switch typ {
	case events.JobSucceeded:
		return events.AttemptSucceeded
	case events.JobTimedOut:
		return events.AttemptTimedOut
	}
	return events.AttemptFailed
}
