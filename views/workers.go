package views

import (
	"context"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Workers is how busy a daemon's worker pool is, as the queue shows it.
type Workers struct {
	// Max is the pool's size (service.max_workers).
	Max int `json:"max"`
	// Busy is how many jobs hold a worker: running, or cancel requested
	// (their plugin runs until it stops).
	Busy int64 `json:"busy"`
	// Waiting is how many queued jobs, due now, are of plugins with no job
	// running: jobs only a free worker holds back, not their plugin's
	// parallelism cap.
	Waiting int64 `json:"waiting"`
	// Saturated says every worker is busy while Waiting jobs of other
	// plugins wait for one.
	Saturated bool `json:"saturated"`
}

// ReadWorkers reads how busy a pool of max workers is at now, from the
// active jobs only (in one read transaction: its cost is the size of the
// queue, never of the history).
func ReadWorkers(ctx context.Context, l *ledger.Ledger, max int, now time.Time) (Workers, error) {
	w := Workers{Max: max}
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		q, err := readQueue(conn, 0)
		if err != nil {
			return err
		}
		running := map[string]bool{}
		for _, j := range q.Jobs {
			if j.Status != events.StatusQueued {
				running[j.Plugin] = true
				w.Busy++
			}
		}
		for _, j := range q.Jobs {
			if j.Status == events.StatusQueued && !running[j.Plugin] && due(j, now) {
				w.Waiting++
			}
		}
		return nil
	})
	w.Saturated = w.Busy >= int64(w.Max) && w.Waiting > 0
	return w, err
}

// due reports whether queued job j may start at now: it waits for no retry.
func due(j Job, now time.Time) bool {
	if j.NextRetryAt == nil {
		return true
	}
	at, err := time.Parse(time.RFC3339Nano, *j.NextRetryAt)
	return err != nil || !at.After(now)
}
