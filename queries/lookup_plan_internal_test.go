package queries

import (
	"strings"
	"testing"
)

// TestLookupsSearchTheStreamIndex checks that a job id prefix, the last
// config.applied and a stream's events after a seq (what following one job
// reads) are found through UNIQUE (stream, version), never by a scan of the
// events table, whose size is the whole history. A stream's newest event
// (of a type) falls back to the one an archive carried, found by the
// primary keys of archived_streams and archived_stream_types, never by a
// scan of them (one row per archived stream and type).
func TestLookupsSearchTheStreamIndex(t *testing.T) {
	conn := planDB(t)
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
		plan := explain(t, conn, tc.name, tc.query, tc.args...)
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

// TestShortIDSearchesTheTailIndex checks that a short id, or a prefix of
// one (views.ResolveJobID), is found through events_stream_tail (migration
// 00020), one entry per stream, and never by a scan of the events table nor
// by a walk of every stream of its kind through UNIQUE (stream, version).
func TestShortIDSearchesTheTailIndex(t *testing.T) {
	conn := planDB(t)
	plan := explain(t, conn, "FindStreamsByTail", findStreamsByTail, "d392", "d393", "job/", 6)
	text := strings.Join(plan, "; ")
	if len(plan) != 1 || !strings.HasPrefix(plan[0], "SEARCH events USING INDEX events_stream_tail (<expr>>? AND <expr><?)") {
		t.Errorf("FindStreamsByTail: plan %q does not search events_stream_tail alone", text)
	}
}
