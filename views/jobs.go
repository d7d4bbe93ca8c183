package views

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// Job is a job as the job_queue projection holds it.
type Job struct {
	ID            string          `json:"job_id"`
	Seq           int64           `json:"seq"`
	Plugin        string          `json:"plugin"`
	Command       string          `json:"command"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Status        events.Status   `json:"status"`
	Attempt       int64           `json:"attempt"`
	MaxAttempts   int64           `json:"max_attempts"`
	SubmittedBy   string          `json:"submitted_by"`
	DedupeKey     *string         `json:"dedupe_key,omitempty"`
	CreatedAt     string          `json:"created_at"`
	StartedAt     *string         `json:"started_at,omitempty"`
	CompletedAt   *string         `json:"completed_at,omitempty"`
	NextRetryAt   *string         `json:"next_retry_at,omitempty"`
	LastError     *string         `json:"last_error,omitempty"`
	ParentJobID   *string         `json:"parent_job_id,omitempty"`
	SourceEventID *string         `json:"source_event_id,omitempty"`
	CorrelationID string          `json:"correlation_id"`
	UpdatedSeq    int64           `json:"updated_seq"`
}

func jobOf(r queries.GetJobRow) Job {
	var payload json.RawMessage
	if r.Payload != nil {
		payload = json.RawMessage(*r.Payload)
	}
	return Job{r.ID, r.Seq, r.Plugin, r.Command, payload, events.Status(r.Status), r.Attempt, r.MaxAttempts, r.SubmittedBy,
		r.DedupeKey, r.CreatedAt, r.StartedAt, r.CompletedAt, r.NextRetryAt, r.LastError, r.ParentJobID,
		r.SourceEventID, r.CorrelationID, r.UpdatedSeq}
}

// JobFilter narrows ListJobs; an empty Status or Plugin matches every job.
type JobFilter struct {
	Status events.Status
	Plugin string
	Limit  int
	// Before, when positive, lists only jobs older than the job of this
	// seq (a page's cursor: the last seq the previous page showed).
	Before int64
}

// ListJobs returns up to f.Limit jobs that match f, newest first (none: an
// empty list, not nil). Each listing reads through an index of what it
// shows, so its cost follows the rows it returns, not the size of the
// history (BenchmarkJobViews).
func ListJobs(ctx context.Context, l *ledger.Ledger, f JobFilter) ([]Job, error) {
	jobs := []Job{}
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		return listJobs(conn, f, func(r queries.GetJobRow) error { jobs = append(jobs, jobOf(r)); return nil })
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// listJobs calls fn for up to f.Limit jobs that match f, newest first, on
// conn (inside whatever read transaction the caller holds). Each status
// has a query of its own that names it, so SQLite reads it through that
// status's index; only succeeded jobs, which no index holds, are found by
// walking the newest jobs (see ListSucceededJobs in queries/jobs.sql).
func listJobs(conn *sqlite.Conn, f JobFilter, fn func(queries.GetJobRow) error) error {
	plugin, limit, before := f.Plugin, int64(f.Limit), f.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	switch f.Status {
	case "":
		return queries.ListJobs(conn, queries.ListJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: limit},
			func(r queries.ListJobsRow) error { return fn(queries.GetJobRow(r)) })
	case events.StatusQueued:
		return queries.ListQueuedJobs(conn, queries.ListQueuedJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: limit},
			func(r queries.ListQueuedJobsRow) error { return fn(queries.GetJobRow(r)) })
	case events.StatusRunning:
		return queries.ListRunningJobs(conn, queries.ListRunningJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: limit},
			func(r queries.ListRunningJobsRow) error { return fn(queries.GetJobRow(r)) })
	case events.StatusCancelRequested:
		return queries.ListCancelRequestedJobs(conn, queries.ListCancelRequestedJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: limit},
			func(r queries.ListCancelRequestedJobsRow) error { return fn(queries.GetJobRow(r)) })
	case events.StatusSucceeded:
		return queries.ListSucceededJobs(conn, queries.ListSucceededJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: limit},
			func(r queries.ListSucceededJobsRow) error { return fn(queries.GetJobRow(r)) })
	case events.StatusDead:
		return queries.ListDeadJobs(conn, queries.ListDeadJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: limit},
			func(r queries.ListDeadJobsRow) error { return fn(queries.GetJobRow(r)) })
	case events.StatusCanceled:
		return queries.ListCanceledJobs(conn, queries.ListCanceledJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: limit},
			func(r queries.ListCanceledJobsRow) error { return fn(queries.GetJobRow(r)) })
	}
	return fmt.Errorf("list jobs: no status %q (one of %v)", f.Status, events.JobStatuses())
}
