package views

import (
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// JobTotals counts every job of each plugin that reached each terminal
// status (succeeded, dead, canceled) over the ledger's life, archived jobs
// included: a read of the small job_totals table, whatever the history.
func JobTotals(ctx context.Context, l *ledger.Ledger) (totals []JobCount, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ListJobTotals(conn, func(r queries.ListJobTotalsRow) error {
			totals = append(totals, JobCount{Plugin: r.Plugin, Status: events.Status(r.Status), Jobs: r.N})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("job totals: %w", err)
	}
	return totals, nil
}
