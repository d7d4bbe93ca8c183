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

// TestLookupsSearchTheStreamIndex checks that a job id prefix, the last
// config.applied and a stream's events after a seq (what following one job
// reads) are found through UNIQUE (stream, version), never by a scan of the
// events table, whose size is the whole history.
func TestLookupsSearchTheStreamIndex(t *testing.T) {
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
		args        []any
	}{
		{"FindStreamsByPrefix", findStreamsByPrefix, []any{"job/0195", "job/0196", 6}},
		{"ReadStreamLastOfType", readStreamLastOfType, []any{"system", "config.applied"}},
		{"ReadStreamAfter", readStreamAfter, []any{"job/0195", 100, "", 1000}},
		{"ReadStreamAfter of a type", readStreamAfter, []any{"job/0195", 100, "job.started", 1000}},
	} {
		var plan []string
		err := sqlitex.ExecuteTransient(conn, "EXPLAIN QUERY PLAN "+tc.query, &sqlitex.ExecOptions{
			Args: tc.args,
			ResultFunc: func(stmt *sqlite.Stmt) error {
				plan = append(plan, stmt.ColumnText(3))
				return nil
			},
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		text := strings.Join(plan, "; ")
		if !strings.Contains(text, "SEARCH events USING") || !strings.Contains(text, "INDEX sqlite_autoindex_events_1 (stream") ||
			strings.Contains(text, "SCAN events") || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: plan %q does not search UNIQUE (stream, version) alone", tc.name, text)
		}
	}
}
