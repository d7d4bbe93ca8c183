package views

import (
	"context"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// PrunableJobs counts the jobs whose logs a log.pruned with cutoff before
// would delete now: terminal jobs that completed before it and still have
// job_log rows (as far as the projections have caught up).
func PrunableJobs(ctx context.Context, l *ledger.Ledger, before time.Time) (n int64, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		n, err = queries.CountPrunableJobs(conn, before.UTC().Format(ledger.TimeFormat))
		return err
	})
	return n, err
}
