package views

import (
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// JobCount is how many jobs of a plugin have a status.
type JobCount struct {
	Plugin string        `json:"plugin"`
	Status events.Status `json:"status"`
	Jobs   int64         `json:"jobs"`
}

// CountedStatuses are the statuses CountJobs counts: those an index holds.
// Succeeded jobs are in none, and counting them would walk the history.
var CountedStatuses = []events.Status{events.StatusQueued, events.StatusRunning, events.StatusCancelRequested,
	events.StatusDead, events.StatusCanceled}

// CountJobs counts jobs by plugin and status for CountedStatuses, through
// their indexes: the cost follows the jobs in those statuses, never the
// history of succeeded jobs.
func CountJobs(ctx context.Context, l *ledger.Ledger) (counts []JobCount, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.CountJobsByPluginAndStatus(conn, func(r queries.CountJobsByPluginAndStatusRow) error {
			counts = append(counts, JobCount{Plugin: r.Plugin, Status: events.Status(r.Status), Jobs: r.Jobs})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return counts, nil
}
