package main

import (
	"fmt"
	"strings"

	"github.com/ductile/ductile/views"
)

// inspectExports is how many export items job inspect shows.
const inspectExports = 20

// printRunOfJob prints what a job reported as a run (views.Inspect): its
// progress, its export items (the first inspectExports) and its result set.
func printRunOfJob(e *env, in *views.Inspection) {
	w := e.stdout
	if p := in.Progress; p != nil {
		if line := progressText(p.Progress, &p.Stage, &p.Message); line != "" {
			fmt.Fprintf(w, "progress   %s (attempt %d)\n", line, p.Attempt)
		}
	}
	if len(in.Exports) > 0 {
		fmt.Fprintf(w, "exports (%d):\n", len(in.Exports))
		for i, it := range in.Exports {
			if i == inspectExports {
				fmt.Fprintf(w, "  more: ductile run export %s --after %s\n", views.ShortID(in.Job.ID), in.Exports[i-1].ExportItemID)
				break
			}
			fmt.Fprint(w, "  ")
			printExportItem(e, it)
		}
	}
	if len(in.ResultRefs) > 0 {
		fmt.Fprintf(w, "results    %s\n", strings.Join(in.ResultRefs, ", "))
	}
}
