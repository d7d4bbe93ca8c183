package views

import (
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// RunQuery narrows FindRuns.
type RunQuery struct {
	Pipeline string // "": every pipeline
	Status   string // "": every status (running | succeeded | failed)
	Limit    int    // 0: 100
}

// FindRuns lists runs, newest first (without their results): what
// `pipeline runs` and GET /runs show.
func FindRuns(ctx context.Context, l *ledger.Ledger, q RunQuery) ([]Run, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	out := []Run{}
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.FindPipelineRuns(conn, queries.FindPipelineRunsParams{Pipeline: q.Pipeline, Status: q.Status, Limit: int64(limit)},
			func(r queries.FindPipelineRunsRow) error {
				out = append(out, runFrom(queries.ListPipelineRunsRow(r)))
				return nil
			})
	})
	if err != nil {
		return nil, fmt.Errorf("find runs: %w", err)
	}
	return out, nil
}
