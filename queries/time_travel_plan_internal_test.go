package queries

import (
	"strings"
	"testing"
)

// TestTimeTravelReadsByKey checks the plans of what job tree --at reads
// (views.ReadJobTreeAt): each probe of the time → seq bisection and the
// log's bounds go through the primary key, a job's events through UNIQUE
// (stream, version), and the tree through job_queue_parent, so the cost
// follows the tree (and the log's length only as log2 of it), and nothing
// scans the events table or sorts apart.
func TestTimeTravelReadsByKey(t *testing.T) {
	const byID = "sqlite_autoindex_job_queue_1" // PRIMARY KEY (id)
	checkPlans(t, []planCase{
		{"ListJobTreeAt", listJobTreeAt, []any{"root", 100, 101}, []string{byID, "job_queue_parent"}},
	})
	conn := planDB(t)
	for _, tc := range []struct {
		name, query string
		args        []any
		want        string // what each SEARCH of events must use
	}{
		{"EventRecordedAt", eventRecordedAt, []any{42}, "USING INTEGER PRIMARY KEY"},
		{"SeqBounds", seqBounds, nil, "SEARCH events"}, // min() and max() of the key: one row each,
		{"ReadStreamThrough", readStreamThrough, []any{"job/x", 100}, "USING INDEX sqlite_autoindex_events_1 (stream=?)"},
		{"ReadStreamVersion", readStreamVersion, []any{"job/x", 1}, "USING INDEX sqlite_autoindex_events_1 (stream=? AND version=?)"},
	} {
		plan := explain(t, conn, tc.name, tc.query, tc.args...)
		text := strings.Join(plan, "; ")
		searched := false
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN events") || strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("%s: plan %q scans the events table or sorts apart", tc.name, text)
			}
			if strings.HasPrefix(step, "SEARCH events") {
				searched = true
				if !strings.Contains(step, tc.want) {
					t.Errorf("%s: plan %q searches events other than %s", tc.name, text, tc.want)
				}
			}
		}
		if !searched {
			t.Errorf("%s: plan %q does not search events by key", tc.name, text)
		}
	}
}
