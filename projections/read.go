package projections

import (
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/queries"
)

// Reads of the job projections that the CLI (and later the API) shows. Each
// reads through an index of what it shows, so its cost follows the rows it
// returns, not the size of the history (BenchmarkJobViews).

// JobFilter narrows ListJobs; an empty Status or Plugin matches every job.
type JobFilter struct {
	Status string
	Plugin string
	Limit  int
}

// ListJobs calls fn for up to f.Limit jobs that match f, newest first, on
// conn (inside whatever read transaction the caller holds). Each status
// has a query of its own that names it, so SQLite reads it through that
// status's index; only succeeded jobs, which no index holds, are found by
// walking the newest jobs (see ListSucceededJobs in queries/jobs.sql).
func ListJobs(conn *sqlite.Conn, f JobFilter, fn func(queries.GetJobRow) error) error {
	plugin, limit := f.Plugin, int64(f.Limit)
	switch f.Status {
	case "":
		return queries.ListJobs(conn, queries.ListJobsParams{Plugin: plugin, MaxJobs: limit},
			func(r queries.ListJobsRow) error { return fn(queries.GetJobRow(r)) })
	case string(events.StatusQueued):
		return queries.ListQueuedJobs(conn, queries.ListQueuedJobsParams{Plugin: plugin, MaxJobs: limit},
			func(r queries.ListQueuedJobsRow) error { return fn(queries.GetJobRow(r)) })
	case string(events.StatusRunning):
		return queries.ListRunningJobs(conn, queries.ListRunningJobsParams{Plugin: plugin, MaxJobs: limit},
			func(r queries.ListRunningJobsRow) error { return fn(queries.GetJobRow(r)) })
	case string(events.StatusCancelRequested):
		return queries.ListCancelRequestedJobs(conn, queries.ListCancelRequestedJobsParams{Plugin: plugin, MaxJobs: limit},
			func(r queries.ListCancelRequestedJobsRow) error { return fn(queries.GetJobRow(r)) })
	case string(events.StatusSucceeded):
		return queries.ListSucceededJobs(conn, queries.ListSucceededJobsParams{Plugin: plugin, MaxJobs: limit},
			func(r queries.ListSucceededJobsRow) error { return fn(queries.GetJobRow(r)) })
	case string(events.StatusDead):
		return queries.ListDeadJobs(conn, queries.ListDeadJobsParams{Plugin: plugin, MaxJobs: limit},
			func(r queries.ListDeadJobsRow) error { return fn(queries.GetJobRow(r)) })
	case string(events.StatusCanceled):
		return queries.ListCanceledJobs(conn, queries.ListCanceledJobsParams{Plugin: plugin, MaxJobs: limit},
			func(r queries.ListCanceledJobsRow) error { return fn(queries.GetJobRow(r)) })
	}
	return fmt.Errorf("list jobs: no status %q (one of %s, %s, %s, %s, %s, %s)", f.Status, string(events.StatusQueued),
		string(events.StatusRunning), string(events.StatusCancelRequested), string(events.StatusSucceeded), string(events.StatusDead), string(events.StatusCanceled))
}

// QueueCounts is the size of the queue: its jobs by status.
type QueueCounts struct {
	Queued          int64 `json:"queued"`
	Running         int64 `json:"running"`
	CancelRequested int64 `json:"cancel_requested"`
}

// Total is how many jobs the queue holds.
func (c QueueCounts) Total() int64 { return c.Queued + c.Running + c.CancelRequested }

// Queue is what ductile queue shows: the queue's size and its first jobs.
type Queue struct {
	Counts QueueCounts
	// Jobs are the first active jobs in run order (oldest first: running,
	// cancel-requested and queued jobs by seq; a retry keeps its place).
	Jobs []queries.GetJobRow
	// More is how many active jobs the limit left out.
	More int64
}

// ReadQueue reads the queue's size and its first limit jobs (all of them
// if limit ≤ 0) on conn; call it inside a read transaction, so the counts
// and the jobs are of one moment. Only the indexes of active jobs are read:
// the cost is the size of the queue, never of the history.
func ReadQueue(conn *sqlite.Conn, limit int) (Queue, error) {
	var q Queue
	counts, err := queries.CountQueue(conn)
	if err != nil {
		return q, fmt.Errorf("read queue: %w", err)
	}
	q.Counts = QueueCounts(counts)
	n := int64(limit)
	if limit <= 0 {
		n = q.Counts.Total()
	}
	err = queries.ListQueue(conn, n, func(r queries.ListQueueRow) error {
		q.Jobs = append(q.Jobs, queries.GetJobRow(r))
		return nil
	})
	if err != nil {
		return q, fmt.Errorf("read queue: %w", err)
	}
	q.More = max(0, q.Counts.Total()-int64(len(q.Jobs)))
	return q, nil
}
