package queries

import "testing"

// TestPluginJobsReadThroughTheirIndex: a plugin's newest jobs (plugin show,
// plugin logs, system status's last runs) are read through
// job_queue_by_plugin (00019) from the newest end, sorting nothing apart,
// so the read stops at its limit whatever the history.
func TestPluginJobsReadThroughTheirIndex(t *testing.T) {
	checkPlans(t, []planCase{
		{"ListPluginJobs", listPluginJobs, []any{"echo", int64(1) << 62, 10}, []string{"job_queue_by_plugin"}},
	})
}
