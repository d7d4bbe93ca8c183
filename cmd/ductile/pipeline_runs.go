package main

import (
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// pipelineRunsCommand lists pipeline runs from the ledger (views.FindRuns).
func pipelineRunsCommand() *cli.Command {
	return &cli.Command{
		Name:      "runs",
		Usage:     "list pipeline runs, newest first: status, trigger, first job",
		ArgsUsage: "[PIPELINE]",
		Flags: []cli.Flag{jsonFlag(),
			&cli.StringFlag{Name: "status", Usage: "only runs with this `STATUS`: running, succeeded or failed"},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "at most `N` runs (1-1000)"}},
		Action: withReadLedger(pipelineRuns),
	}
}

// pipelineStatusCommand shows one run (views.ReadRun).
func pipelineStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a pipeline run: its status, the steps it ran or bypassed (and why) and, once finished, its results",
		ArgsUsage: "RUN_ID",
		Flags:     []cli.Flag{jsonFlag()},
		Action:    withReadLedger(pipelineStatus),
	}
}

func pipelineRuns(c *cli.Context, e *env, l *ledger.Ledger) error {
	if c.NArg() > 1 {
		return usagef("pipeline runs takes at most one PIPELINE, got %d arguments (see: ductile pipeline runs --help)", c.NArg())
	}
	status := events.RunStatus(c.String("status"))
	if status != "" && !slices.Contains(events.RunStatuses(), status) {
		return usagef("--status %q: use running, succeeded or failed", status)
	}
	limit := c.Int("limit")
	if limit < 1 || limit > 1000 {
		return usagef("--limit %d: give 1 to 1000", limit)
	}
	runs, err := views.FindRuns(c.Context, l, views.RunQuery{Pipeline: c.Args().First(), Status: status, Limit: limit})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, struct {
			Runs []views.Run `json:"runs"`
		}{runs})
	}
	if len(runs) == 0 {
		fmt.Fprintln(e.stdout, "no pipeline runs match (start one with: ductile pipeline run NAME)")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tPIPELINE\tSTATUS\tTRIGGER\tSTARTED\tFIRST JOB\tERROR")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", views.ShortID(r.RunID), r.Pipeline, r.Status, r.Trigger, r.StartedAt, views.ShortID(r.JobID), oneLine(r.Error, 60))
	}
	return tw.Flush()
}

func pipelineStatus(c *cli.Context, e *env, l *ledger.Ledger) error {
	if c.NArg() != 1 {
		return usagef("pipeline status takes one RUN_ID, got %d argument(s) (see: ductile pipeline runs)", c.NArg())
	}
	id, err := views.ResolveRunID(c.Context, l, c.Args().First())
	var run views.Run
	if err == nil {
		run, err = views.ReadRun(c.Context, l, id)
	}
	var ambiguous *views.AmbiguousIDError
	switch {
	case errors.Is(err, views.ErrRunNotFound):
		return hintf(errcode.NotFound, "see: ductile pipeline runs", "%v", err)
	case errors.As(err, &ambiguous):
		return withHint(errcode.InvalidInput, ambiguous, "give more characters of it, or the whole id")
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, run)
	}
	w := e.stdout
	fmt.Fprintf(w, "run %s of pipeline %s: %s\n", run.RunID, run.Pipeline, run.Status)
	if run.Error != "" {
		fmt.Fprintf(w, "  error     %s\n", run.Error)
	}
	fmt.Fprintf(w, "  version   %s\n", run.Hash)
	fmt.Fprintf(w, "  trigger   %s\n", run.Trigger)
	fmt.Fprintf(w, "  started   %s (seq %d)\n", run.StartedAt, run.StartedSeq)
	if run.FinishedAt != "" {
		fmt.Fprintf(w, "  finished  %s (seq %d)\n", run.FinishedAt, run.FinishedSeq)
	}
	for _, st := range run.Steps {
		fmt.Fprintf(w, "  step %s: %s", st.Node, st.Outcome)
		switch st.Outcome {
		case views.StepEnqueued:
			fmt.Fprintf(w, " job %s", st.JobID)
			if st.Event != "" {
				fmt.Fprintf(w, " on %s", st.Event)
			}
			if st.Error != "" {
				fmt.Fprintf(w, ", dead at once: %s", st.Error)
			}
		default:
			fmt.Fprintf(w, ": %s", st.Reason)
		}
		fmt.Fprintf(w, " (seq %d)\n", st.Seq)
	}
	for _, r := range run.Results {
		fmt.Fprintf(w, "  result %s: %s %s, job %s %s", r.Node, r.Plugin, r.Command, r.JobID, r.Status)
		switch {
		case r.Error != "":
			fmt.Fprintf(w, ": %s", r.Error)
		case len(r.Result) > 0:
			fmt.Fprintf(w, ": %s", resultText(r.Result))
		}
		fmt.Fprintln(w)
	}
	if run.JobID != "" {
		fmt.Fprintf(w, "details: ductile job tree %s\n", run.JobID)
	}
	return nil
}

// pipelineApplied says, when a daemon runs on the state directory, whether
// it runs the pipeline name at hash (the config file's version): nil
// without a daemon (or its record).
func pipelineApplied(a events.ConfigAppliedData, running bool, name, hash string) *bool {
	if !running {
		return nil
	}
	applied := slices.Contains(a.Pipelines, events.AppliedPipeline{Name: name, Hash: hash})
	return &applied
}

// notAppliedNote is the marker of a pipeline whose config-file version the
// running daemon does not run.
func notAppliedNote(a events.ConfigAppliedData, name string) string {
	for _, p := range a.Pipelines {
		if p.Name == name {
			return fmt.Sprintf("# not applied yet: the running daemon (pid %d) runs version %s (reload to apply: ductile system reload)", a.PID, shortHash(p.Hash))
		}
	}
	for _, p := range a.SkippedPipelines {
		if p.Name == name {
			return fmt.Sprintf("# not applied: the running daemon (pid %d) skipped it: %s", a.PID, p.Reason)
		}
	}
	return fmt.Sprintf("# not applied yet: the running daemon (pid %d) does not run it (reload to apply: ductile system reload)", a.PID)
}
