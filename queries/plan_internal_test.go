package queries

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/migrations"
)

// TestDispatchQueriesUseTheActiveIndex checks the plans of the queries the
// dispatcher and recovery run often or at start-up: each must read the
// partial indexes of active jobs it names (migrations 00007, 00008), every
// one of them, and never scan the table job_queue itself, whose size is the
// whole history.
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
		name, query string
		indexes     []string
	}{
		{"ListReadyJobs", listReadyJobs, []string{"job_queue_active"}},
		{"ListActiveJobs", listActiveJobs, []string{"job_queue_active", "job_queue_cancel_requested"}},
		{"ListCancelRequested", listCancelRequested, []string{"job_queue_cancel_requested"}},
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
		text := strings.Join(plan, "; ")
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN job_queue") && !slices.ContainsFunc(tc.indexes, func(index string) bool {
				return strings.HasSuffix(step, "USING INDEX "+index)
			}) {
				t.Errorf("%s: plan %q reads job_queue other than through %v", tc.name, text, tc.indexes)
			}
		}
		for _, index := range tc.indexes {
			if !strings.Contains(text, "INDEX "+index) {
				t.Errorf("%s: plan %q does not use %s", tc.name, text, index)
			}
		}
	}
}
