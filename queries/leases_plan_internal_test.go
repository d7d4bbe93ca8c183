package queries

import (
	"strings"
	"testing"
)

// TestClaimsReadThroughTheirIndexes: a remote claim reads the queued jobs
// of the worker's plugins and counts their running ones through the
// indexes of active jobs, so its cost follows the queue, not the history.
func TestClaimsReadThroughTheirIndexes(t *testing.T) {
	conn := planDB(t)
	for _, tc := range []struct {
		name, query string
		args        []any
	}{
		{"ListClaimableJobs", listClaimableJobs, []any{`["render"]`, 256}},
		{"ListRunningPlugins", listRunningPlugins, []any{`["render"]`}},
	} {
		plan := strings.Join(explain(t, conn, tc.name, tc.query, tc.args...), "; ")
		t.Logf("%s: %s", tc.name, plan)
		if strings.Contains(plan, "job_queue_by_plugin") || (strings.Contains(plan, "SCAN job_queue") && !strings.Contains(plan, "INDEX job_queue_")) {
			t.Errorf("%s: plan %q reads job_queue other than through the indexes of active jobs", tc.name, plan)
		}
	}
}
