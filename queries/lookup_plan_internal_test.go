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
// events table, whose size is the whole history. A stream's newest event
// (of a type) falls back to the one an archive carried, found by the
// primary keys of archived_streams and archived_stream_types, never by a
// scan of them (one row per archived stream and type).
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
		carried     []string // the archived tables it must search by primary key
	}{
		{"FindStreamsByPrefix", findStreamsByPrefix, []any{"job/0195", "job/0196", 6}, nil},
		{"ReadStreamLast", readStreamLast, []any{"schedule/p/s"}, []string{"SEARCH a USING PRIMARY KEY (stream=?)", "SEARCH c USING PRIMARY KEY (stream=? AND type=?)"}},
		{"ReadStreamLastOfType", readStreamLastOfType, []any{"system", "config.applied"}, []string{"SEARCH archived_stream_types USING PRIMARY KEY (stream=? AND type=?)"}},
		{"ReadStreamAfter", readStreamAfter, []any{"job/0195", 100, "", 1000}, nil},
		{"ReadStreamAfter of a type", readStreamAfter, []any{"job/0195", 100, "job.started", 1000}, nil},
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
		for _, want := range tc.carried {
			if !strings.Contains(text, want) {
				t.Errorf("%s: plan %q does not %s", tc.name, text, want)
			}
		}
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") && !strings.HasPrefix(step, "SCAN (subquery") {
				t.Errorf("%s: plan %q scans a table (%s)", tc.name, text, step)
			}
		}
	}
}
