package queries

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/migrations"
)

// TestDispatchQueriesUseTheActiveIndex checks the plans of the queries the
// dispatcher and recovery run often or at start-up: each must read one of
// the partial indexes of active jobs (migration 00007), never scan the
// table job_queue itself, whose size is the whole history.
func TestDispatchQueriesUseTheActiveIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.db")
	if _, err := migrations.Up(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		name, query, index string
	}{
		{"ListReadyJobs", listReadyJobs, "job_queue_active"},
		{"ListActiveJobs", listActiveJobs, "job_queue_active"},
		{"ListCancelRequested", listCancelRequested, "job_queue_cancel_requested"},
	} {
		var plan []string
		err := sqlitex.ExecuteTransient(conn, "EXPLAIN QUERY PLAN "+tc.query, &sqlitex.ExecOptions{
			Args: []any{"[]", 10}[:strings.Count(tc.query, "?")],
			ResultFunc: func(stmt *sqlite.Stmt) error {
				plan = append(plan, stmt.ColumnText(3))
				return nil
			},
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN job_queue") && !strings.HasSuffix(step, "USING INDEX "+tc.index) {
				t.Errorf("%s: plan %q reads job_queue other than through %s", tc.name, strings.Join(plan, "; "), tc.index)
			}
		}
		if text := strings.Join(plan, "; "); !strings.Contains(text, "INDEX "+tc.index) {
			t.Errorf("%s: plan %q does not use %s", tc.name, text, tc.index)
		}
	}
}
