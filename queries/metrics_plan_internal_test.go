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

// TestJobCountsReadTheStatusIndexes checks that the count of jobs by plugin
// and status (a /metrics scrape) reads each status through its partial
// index, never job_queue itself, whose size is the whole history. Grouping
// sorts apart only the rows of those statuses.
func TestJobCountsReadTheStatusIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.db")
	if _, err := migrations.Up(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var plan []string
	err = sqlitex.ExecuteTransient(conn, "EXPLAIN QUERY PLAN "+countJobsByPluginAndStatus, &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error {
			plan = append(plan, stmt.ColumnText(3))
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "; ")
	reads := 0
	for _, step := range plan {
		if !strings.HasPrefix(step, "SCAN job_queue") && !strings.HasPrefix(step, "SEARCH job_queue") {
			continue
		}
		reads++
		if !strings.Contains(step, "INDEX job_queue_active") && !strings.Contains(step, "INDEX job_queue_cancel_requested") &&
			!strings.Contains(step, "INDEX job_queue_dead_or_canceled") {
			t.Errorf("plan %q reads job_queue other than through a status index", text)
		}
	}
	if reads != 3 {
		t.Errorf("plan %q: want three reads of job_queue, one per index", text)
	}
	t.Log(text)
}
