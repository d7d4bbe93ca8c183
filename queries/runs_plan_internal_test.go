package queries

import (
	"strings"
	"testing"
)

// TestRunListingsReadTheirIndex checks the plans of what pipeline runs and
// GET /runs read (views.FindRuns): each filter reads its own index from the
// newest start (migration 00018), sorts nothing apart and so stops at its
// limit, whatever the number of runs recorded.
func TestRunListingsReadTheirIndex(t *testing.T) {
	conn := planDB(t)
	for _, tc := range []struct {
		name, query string
		args        []any
		index       string
	}{
		{"FindPipelineRuns", findPipelineRuns, []any{10}, "pipeline_runs_by_seq"},
		{"FindPipelineRunsOfPipeline", findPipelineRunsOfPipeline, []any{"p", 10}, "pipeline_runs_by_pipeline (pipeline=?)"},
		{"FindPipelineRunsWithStatus", findPipelineRunsWithStatus, []any{"succeeded", 10}, "pipeline_runs_by_status (status=?)"},
		{"FindPipelineRunsOfPipelineWithStatus", findPipelineRunsOfPipelineWithStatus, []any{"p", "failed", 10}, "pipeline_runs_by_pipeline (pipeline=?)"},
	} {
		plan := explain(t, conn, tc.name, tc.query, tc.args...)
		text := strings.Join(plan, "; ")
		for _, step := range plan {
			if strings.Contains(step, "pipeline_runs") && !strings.Contains(step, "INDEX "+tc.index) {
				t.Errorf("%s: plan %q reads pipeline_runs other than through %s", tc.name, text, tc.index)
			}
			if strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("%s: plan %q sorts its rows apart: it reads them all before the first", tc.name, text)
			}
		}
		if !strings.Contains(text, "INDEX "+tc.index) {
			t.Errorf("%s: plan %q does not use %s", tc.name, text, tc.index)
		}
	}
}
