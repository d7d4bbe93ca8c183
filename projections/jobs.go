package projections

import (
	"encoding/json"
	"errors"
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// JobQueue keeps one row per job: its current status and attempt, the
// dispatcher's view of the queue (spec §12 job_queue); and job_totals, how
// many jobs of each plugin reached each terminal status, archived ones
// included (ledger.archived removes job rows, never totals).
type JobQueue struct{}

func (JobQueue) Name() string { return "job_queue" }

func (q JobQueue) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return q.apply(conn, ev, func(plugin string, status events.Status) error {
		return queries.AddJobTotal(conn, queries.AddJobTotalParams{Plugin: plugin, Status: string(status), N: 1})
	})
}

// apply is Apply, handing each job that ends to finished (applyPage adds
// them up per page).
func (JobQueue) apply(conn *sqlite.Conn, ev ledger.Event, finished func(plugin string, status events.Status) error) error {
	id := events.JobIDFromStream(ev.Stream)
	if id == "" {
		if ev.Type == events.LedgerArchived {
			return forgetArchived(conn, ev, queries.DeleteArchivedJobs)
		}
		return nil
	}
	at := ev.RecordedAtText()
	switch ev.Type {
	case events.JobEnqueued:
		var d events.Enqueued
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		meta, err := decodeMeta(ev)
		if err != nil {
			return err
		}
		return queries.InsertJob(conn, queries.InsertJobParams{
			ID: id, Seq: ev.Seq, Plugin: d.Plugin, Command: d.Command, Payload: rawPtr(d.Payload),
			MaxAttempts: int64(d.MaxAttempts), SubmittedBy: d.SubmittedBy, DedupeKey: strPtr(d.DedupeKey),
			CreatedAt: at, ParentJobID: strPtr(d.ParentJobID), SourceEventID: strPtr(d.SourceEventID),
			CorrelationID: meta.CorrelationID,
		})
	case events.JobStarted:
		var d events.Started
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		return queries.SetJobStarted(conn, queries.SetJobStartedParams{Attempt: int64(d.Attempt), At: &at, Seq: ev.Seq, ID: id})
	case events.JobSucceeded:
		if err := queries.SetJobEnded(conn, queries.SetJobEndedParams{Status: string(events.StatusSucceeded), At: &at, Seq: ev.Seq, ID: id}); err != nil {
			return err
		}
		return countFinished(conn, id, events.StatusSucceeded, finished)
	case events.JobFailed, events.JobTimedOut:
		var d struct { // only the error of events.AttemptEnded, not its output
			Error string `json:"error"`
		}
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		return queries.SetJobLastError(conn, queries.SetJobLastErrorParams{LastError: strPtr(d.Error), Seq: ev.Seq, ID: id})
	case events.JobRetryScheduled:
		var d events.RetryScheduled
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		return queries.SetJobRetry(conn, queries.SetJobRetryParams{Attempt: int64(d.Attempt), NextRetryAt: &d.NextRetryAt, MaxAttempts: int64(d.MaxAttempts), Seq: ev.Seq, ID: id})
	case events.JobDead:
		var d events.Dead
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		if err := queries.SetJobDead(conn, queries.SetJobDeadParams{At: &at, Reason: strPtr(d.Reason), Seq: ev.Seq, ID: id}); err != nil {
			return err
		}
		return countFinished(conn, id, events.StatusDead, finished)
	case events.JobRecovered:
		var d events.Recovered
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		if d.Requeued {
			return queries.SetJobQueued(conn, queries.SetJobQueuedParams{Attempt: int64(d.NextAttempt), LastError: &d.Reason, Seq: ev.Seq, ID: id})
		}
		return queries.SetJobAttempt(conn, queries.SetJobAttemptParams{Attempt: int64(d.NextAttempt), LastError: &d.Reason, Seq: ev.Seq, ID: id})
	case events.JobCancelRequested:
		return queries.SetJobStatus(conn, queries.SetJobStatusParams{Status: string(events.StatusCancelRequested), Seq: ev.Seq, ID: id})
	case events.JobCanceled:
		var d events.Canceled
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		if err := queries.SetJobEnded(conn, queries.SetJobEndedParams{Status: string(events.StatusCanceled), At: &at, LastError: strPtr(d.Reason), Seq: ev.Seq, ID: id}); err != nil {
			return err
		}
		return countFinished(conn, id, events.StatusCanceled, finished)
	}
	return nil
}

// countFinished hands job id, which reached status, to finished with its
// plugin (a job job_queue does not hold is not counted, as its row was not
// ended).
func countFinished(conn *sqlite.Conn, id string, status events.Status, finished func(string, events.Status) error) error {
	plugin, err := queries.GetJobPlugin(conn, id)
	if errors.Is(err, queries.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return finished(plugin, status)
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

// JobLog keeps one row per attempt: the plugin's response, stderr, exit
// code and timings (spec §12 job_log, per attempt).
type JobLog struct{}

func (JobLog) Name() string { return "job_log" }

func (JobLog) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	id := events.JobIDFromStream(ev.Stream)
	if id == "" {
		switch ev.Type {
		case events.LogPruned:
			return prune(conn, ev)
		case events.LedgerArchived:
			return forgetArchived(conn, ev, queries.DeleteArchivedJobLog)
		}
		return nil
	}
	at := ev.RecordedAtText()
	switch ev.Type {
	case events.JobStarted:
		var d events.Started
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		// Read, then insert: an INSERT … SELECT may write several rows, so
		// SQLite keeps a statement journal of every page it changes (a
		// tenth of the daemon's writer CPU per job).
		j, err := queries.GetJobForLog(conn, id)
		if errors.Is(err, queries.ErrNoRows) {
			return nil // no such job: no attempt to log
		}
		if err != nil {
			return err
		}
		return queries.InsertJobLogRow(conn, queries.InsertJobLogRowParams{
			JobID: id, Attempt: int64(d.Attempt), Plugin: j.Plugin, Command: j.Command, Status: string(events.AttemptRunning),
			SubmittedBy: j.SubmittedBy, CreatedAt: j.CreatedAt, StartedAt: at, ParentJobID: j.ParentJobID,
			SourceEventID: j.SourceEventID, StartedSeq: ev.Seq,
		})
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
		var d events.AttemptEnded
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		status := attemptStatus(ev.Type)
		exit, dur, seq := int64(d.ExitCode), d.DurationMS, ev.Seq
		truncated := int64(0)
		if d.StderrTruncated {
			truncated = 1
		}
		return queries.EndJobLog(conn, queries.EndJobLogParams{
			Status: string(status), Kind: strPtr(string(d.Kind)), Result: rawPtr(d.Response), Stdout: strPtr(d.Stdout),
			Stderr: strPtr(d.Stderr), StderrTruncated: truncated, LastError: strPtr(d.Error), ExitCode: &exit,
			At: &at, DurationMs: &dur, Seq: &seq, JobID: id, Attempt: int64(d.Attempt),
		})
	case events.JobRecovered:
		var d events.Recovered
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		seq := ev.Seq
		return queries.SetJobLogStatus(conn, queries.SetJobLogStatusParams{Status: string(events.AttemptRecovered), LastError: &d.Reason, At: &at, Seq: &seq, JobID: id, Attempt: int64(d.Attempt)})
	case events.JobCanceled:
		var d events.Canceled
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		seq := ev.Seq
		// Only an attempt that was running has a row; a queued job has none.
		return queries.CancelJobLog(conn, queries.CancelJobLogParams{LastError: strPtr(d.Reason), At: &at, Seq: &seq, JobID: id, Attempt: int64(d.Attempt)})
	}
	return nil
}

func (JobLog) Reset(conn *sqlite.Conn) error { return queries.DeleteJobLog(conn) }

func (JobLog) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpJobLog(conn, func(r queries.DumpJobLogRow) error { return dumpRow(w, r) })
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
