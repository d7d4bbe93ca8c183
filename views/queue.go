package views

import (
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// QueueCounts is the size of the queue: its jobs by status.
type QueueCounts struct {
	Queued          int64 `json:"queued"`
	Running         int64 `json:"running"`
	CancelRequested int64 `json:"cancel_requested"`
}

// Total is how many jobs the queue holds.
func (c QueueCounts) Total() int64 { return c.Queued + c.Running + c.CancelRequested }

// Queue is the queue's size and its first jobs.
type Queue struct {
	Counts QueueCounts `json:"counts"`
	// Jobs are the first active jobs in run order (oldest first: running,
	// cancel-requested and queued jobs by seq; a retry keeps its place).
	Jobs []Job `json:"active"`
	// More is how many active jobs the limit left out.
	More int64 `json:"more"`
}

// ReadQueue reads the queue's size and its first limit jobs (all of them
// if limit ≤ 0) in one read transaction, so the counts and the jobs are of
// one moment. Only the indexes of active jobs are read: the cost is the
// size of the queue, never of the history.
func ReadQueue(ctx context.Context, l *ledger.Ledger, limit int) (q Queue, err error) {
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		q, err = readQueue(conn, limit)
		return err
	})
	return q, err
}

// readQueue is ReadQueue on conn, inside the caller's read transaction.
func readQueue(conn *sqlite.Conn, limit int) (Queue, error) {
	q := Queue{Jobs: []Job{}}
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
		q.Jobs = append(q.Jobs, jobOf(queries.GetJobRow(r)))
		return nil
	})
	if err != nil {
		return q, fmt.Errorf("read queue: %w", err)
	}
	q.More = max(0, q.Counts.Total()-int64(len(q.Jobs)))
	return q, nil
}
