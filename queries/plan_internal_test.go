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
// dispatcher and recovery run often or at start-up: each must read the
// partial index of active jobs (migration 00005), never scan job_queue,
// whose size is the whole history.
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
	for name, query := range map[string]string{
		"ListReadyJobs":       listReadyJobs,
		"ListActiveJobs":      listActiveJobs,
		"ListCancelRequested": listCancelRequested,
	} {
		var plan []string
		err := sqlitex.ExecuteTransient(conn, "EXPLAIN QUERY PLAN "+query, &sqlitex.ExecOptions{
			Args: []any{"[]", 10}[:strings.Count(query, "?")],
			ResultFunc: func(stmt *sqlite.Stmt) error {
				plan = append(plan, stmt.ColumnText(3))
				return nil
			},
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := strings.Join(plan, "; ")
		if !strings.Contains(text, "job_queue_active") || strings.Contains(text, "SCAN job_queue") {
			t.Errorf("%s: plan %q does not read job_queue through job_queue_active", name, text)
		}
	}
}
