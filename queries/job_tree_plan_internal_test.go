package queries

import "testing"

// TestJobTreeWalksTheParentIndex checks that GET /job/{id}/tree finds the
// root by its id and each job's children through job_queue_parent: its
// cost follows the tree, not the history, and nothing is sorted apart.
func TestJobTreeWalksTheParentIndex(t *testing.T) {
	const byID = "sqlite_autoindex_job_queue_1" // PRIMARY KEY (id)
	checkPlans(t, []planCase{
		{"ListJobTree", listJobTree, []any{101, "root"}, []string{byID, "job_queue_parent"}},
	})
}
