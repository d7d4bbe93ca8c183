package views

import (
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// RunQuery narrows FindRuns.
type RunQuery struct {
	Pipeline string           // "": every pipeline
	Status   events.RunStatus // "": every status
	Limit    int              // 0: 100
}

// FindRuns lists runs, newest first (without their results): what
// `pipeline runs` and GET /runs show.
func FindRuns(ctx context.Context, l *ledger.Ledger, q RunQuery) ([]Run, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	out := []Run{}
	add := func(r queries.FindPipelineRunsRow) error {
		out = append(out, runFrom(r))
		return nil
	}
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		switch {
		case q.Pipeline != "" && q.Status != "":
			return queries.FindPipelineRunsOfPipelineWithStatus(conn, queries.FindPipelineRunsOfPipelineWithStatusParams{Pipeline: q.Pipeline, Status: string(q.Status), Limit: int64(limit)},
				func(r queries.FindPipelineRunsOfPipelineWithStatusRow) error {
					return add(queries.FindPipelineRunsRow(r))
				})
		case q.Pipeline != "":
			return queries.FindPipelineRunsOfPipeline(conn, queries.FindPipelineRunsOfPipelineParams{Pipeline: q.Pipeline, Limit: int64(limit)},
				func(r queries.FindPipelineRunsOfPipelineRow) error { return add(queries.FindPipelineRunsRow(r)) })
		case q.Status != "":
			return queries.FindPipelineRunsWithStatus(conn, queries.FindPipelineRunsWithStatusParams{Status: string(q.Status), Limit: int64(limit)},
				func(r queries.FindPipelineRunsWithStatusRow) error { return add(queries.FindPipelineRunsRow(r)) })
		default:
			return queries.FindPipelineRuns(conn, int64(limit), add)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("find runs: %w", err)
	}
	return out, nil
}
