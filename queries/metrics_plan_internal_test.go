package queries

import (
	"strings"
	"testing"
)

// TestJobCountsReadTheStatusIndexes checks that the count of jobs by plugin
// and status (a /metrics scrape) reads each status through its partial
// index, never job_queue itself, whose size is the whole history. Grouping
// sorts apart only the rows of those statuses.
func TestJobCountsReadTheStatusIndexes(t *testing.T) {
	plan := explain(t, planDB(t), "CountJobsByPluginAndStatus", countJobsByPluginAndStatus)
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
