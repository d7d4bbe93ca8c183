package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// inspectExports is how many export items job inspect shows.
const inspectExports = 20

// runOfJob is what job inspect shows of a job as a run: its progress and
// its first export items (views.ReadRunRecord, views.RunExports).
type runOfJob struct {
	RunStatus     views.RunStatus    `json:"run_status"`
	Progress      *float64           `json:"progress"`
	Stage         *string            `json:"stage"`
	Message       *string            `json:"message"`
	ExportsCount  int                `json:"exports_count"`
	Exports       []views.ExportItem `json:"exports"`
	ExportsCursor string             `json:"exports_next_after,omitempty"` // more: ductile run export --after
	ResultRefs    []string           `json:"result_refs"`
}

// readRunOf reads job id's run: its progress and first export items.
func readRunOf(c *cli.Context, l *ledger.Ledger, id string) (runOfJob, error) {
	rec, err := views.ReadRunRecord(c.Context, l, id)
	if err != nil {
		return runOfJob{}, err
	}
	items, next, err := views.RunExports(c.Context, l, id, "", inspectExports)
	if err != nil {
		return runOfJob{}, err
	}
	if items == nil {
		items = []views.ExportItem{}
	}
	return runOfJob{RunStatus: rec.Status, Progress: rec.Progress, Stage: rec.Stage, Message: rec.Message,
		ExportsCount: rec.ExportsCount, Exports: items, ExportsCursor: next, ResultRefs: rec.ResultRefs}, nil
}

// printRunOfJob prints a job's progress and export items, if it has any.
func printRunOfJob(e *env, r runOfJob) {
	w := e.stdout
	if line := progressText(r.Progress, r.Stage, r.Message); line != "" {
		fmt.Fprintf(w, "progress   %s\n", line)
	}
	if r.ExportsCount == 0 {
		return
	}
	fmt.Fprintf(w, "exports (%d):\n", r.ExportsCount)
	for _, it := range r.Exports {
		fmt.Fprint(w, "  ")
		printExportItem(e, it)
	}
	if r.ExportsCursor != "" {
		fmt.Fprintf(w, "  more: ductile run export %s --after %s\n", views.ShortID(r.Exports[0].RunID), r.ExportsCursor)
	}
}
