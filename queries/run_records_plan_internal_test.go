package queries

import (
	"strings"
	"testing"
)

// TestRunRecordListingsReadTheirIndex checks the plans of the run
// listings of GET /runs and `ductile run list` (views.ListRuns) that are
// not job listings: each reads its index of job_queue (migration 00021 for
// a task's) from the newest run, sorts nothing apart and so stops at its
// limit, whatever the number of runs recorded.
func TestRunRecordListingsReadTheirIndex(t *testing.T) {
	conn := planDB(t)
	for _, tc := range []struct {
		name, query string
		args        []any
		index       string
	}{
		{"ListRunIDs", listRunIDs, []any{int64(1) << 62, 10}, "sqlite_autoindex_job_queue_2"},
		{"ListDeadRunIDs", listDeadRunIDs, []any{1, "", int64(1) << 62, 10}, "job_queue_dead_or_canceled (status=? AND seq<?)"},
		{"ListRunIDsOfTask", listRunIDsOfTask, []any{"t", "", "", int64(1) << 62, 10}, "job_queue_by_task (task_id=? AND seq<?)"},
	} {
		plan := explain(t, conn, tc.name, tc.query, tc.args...)
		text := strings.Join(plan, "; ")
		if strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("%s: plan %q sorts its rows apart: it reads them all before the first", tc.name, text)
		}
		if !strings.Contains(text, "INDEX "+tc.index) {
			t.Errorf("%s: plan %q does not use %s", tc.name, text, tc.index)
		}
	}
}
