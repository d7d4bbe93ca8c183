package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// runCommand is the run resource on the command line: what /runs is over
// HTTP (a run is a job: run_id = job id; a pipeline run is kind pipeline).
// `ductile run PLUGIN [COMMAND]` (the main spec's §11.6 form) is run
// create: a first argument that names no action of run is a plugin.
func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "create, show, list, follow, cancel and retry runs (ductile run PLUGIN [COMMAND] creates one)",
		ArgsUsage: "[PLUGIN [COMMAND]]",
		Description: "A run is one job of a plugin command (run_id = the job id), as POST /runs makes it;\n" +
			"a pipeline run (ductile pipeline run) is a run of kind pipeline. Each action mirrors\n" +
			"the HTTP API's: create (POST /runs), get (GET /runs/{id}), list (GET /runs), watch\n" +
			"(GET /runs/stream), cancel, retry, export (GET /runs/{id}/export).\n" +
			"ductile run PLUGIN [COMMAND] is ductile run create PLUGIN [COMMAND]: a first argument\n" +
			"that is not one of the actions below names a plugin (a plugin named like an action\n" +
			"is created with run create).",
		Flags: runCreateFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.ShowSubcommandHelp(c)
			}
			return runCreate(c)
		},
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a plugin run: enqueue the command; without a running daemon, run it here and now",
				ArgsUsage: "PLUGIN [COMMAND]",
				Description: "Enqueues a job of the plugin's COMMAND (its entry; default as plugin run picks it) with\n" +
					"--args as its payload, as POST /runs does. With a daemon running on the state directory\n" +
					"the daemon runs it; --mode sync waits until it ends (bounded by --timeout). Without one,\n" +
					"this command runs it itself (retries included) and prints the run once it ended.\n" +
					"--idempotency-key: within the dedupe window the same key answers the run it made\n" +
					"(existing: true) and enqueues nothing; with another plugin or command it is refused\n" +
					"(code idempotency_conflict). Exit 1 when a run waited for ends other than succeeded.",
				Flags:  runCreateFlags(),
				Action: runCreate,
			},
			{
				Name:      "get",
				Usage:     "show a run: a plugin run's record (status, progress, error, result refs, attempts) or a pipeline run",
				ArgsUsage: "RUN_ID",
				Flags:     []cli.Flag{jsonFlag()},
				Action:    withReadLedger(runGet),
			},
			{
				Name:  "list",
				Usage: "list runs, newest first: plugin runs (by task, plugin, status; a page at a time) or pipeline runs",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "kind", Value: api.RunKindPlugin, Usage: "`KIND` of runs: plugin or pipeline"},
					&cli.StringFlag{Name: "task-id", Usage: "plugin runs of this `TASK` only"},
					&cli.StringFlag{Name: "plugin", Usage: "plugin runs of this `PLUGIN` only"},
					&cli.StringFlag{Name: "pipeline", Usage: "pipeline runs of this `PIPELINE` only (implies --kind pipeline)"},
					&cli.StringFlag{Name: "status", Usage: "runs in this `STATUS` only (plugin: " + runStatusNames() + "; pipeline: running, succeeded, failed)"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` runs (1-1000; plugin runs: 500 a page)"},
					&cli.StringFlag{Name: "cursor", Usage: "plugin runs: the page after this `CURSOR` (the next_cursor a page printed)"},
					jsonFlag(),
				},
				Action: withReadLedger(runList),
			},
			{
				Name:      "watch",
				Usage:     "follow a plugin run until it ends: a live progress bar with its stage and message (--json: one line per change)",
				ArgsUsage: "RUN_ID",
				Description: "Reads the run's changes from the ledger as GET /runs/stream?run_id= does, with or without\n" +
					"a daemon. Exit 0 when the run succeeded, 1 when it ended failed, timeout or canceled.",
				Flags:  []cli.Flag{jsonFlag()},
				Action: withReadLedger(runWatch),
			},
			{
				Name:      "cancel",
				Usage:     "cancel a plugin run: a queued one at once, a running one by stopping its plugin (cancel_requested, then canceled)",
				ArgsUsage: "RUN_ID",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Value: "canceled from the CLI", Usage: "why: the run's cancel_reason"},
					jsonFlag(), dryRunFlag(),
				},
				Action: withExistingLedger(runCancel),
			},
			{
				Name:      "retry",
				Usage:     "run a failed, timed out or canceled plugin run again, as a new run (parent_run_id, root_run_id, attempt + 1)",
				ArgsUsage: "RUN_ID",
				Flags:     []cli.Flag{jsonFlag(), dryRunFlag()},
				Action:    withExistingLedger(runRetry),
			},
			{
				Name:      "export",
				Usage:     "list a plugin run's export items, oldest first, a page at a time",
				ArgsUsage: "RUN_ID",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "after", Usage: "the items after this `CURSOR` (the next_after a page printed, or an export item id)"},
					&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most `N` items (1-1000)"},
					jsonFlag(),
				},
				Action: withReadLedger(runExport),
			},
		},
	}
}

// runStatusNames lists the run statuses, comma-separated.
func runStatusNames() string {
	var names []string
	for _, s := range views.RunStatuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// readRun reads the run arg names: a plugin run (a job) if one has it,
// else a pipeline run; as GET /runs/{id} answers it.
func readRun(c *cli.Context, l *ledger.Ledger, arg string) (api.RunResource, error) {
	ctx := c.Context
	id, err := views.ResolveJobID(ctx, l, arg)
	if err == nil {
		rec, err := views.ReadRunRecord(ctx, l, id)
		if err != nil {
			return api.RunResource{}, runError(err)
		}
		return api.RunResource{Plugin: &rec}, nil
	}
	if !errors.Is(err, views.ErrJobNotFound) {
		return api.RunResource{}, runError(err)
	}
	runID, perr := views.ResolveRunID(ctx, l, arg)
	var run views.Run
	if perr == nil {
		run, perr = views.ReadRun(ctx, l, runID)
	}
	if errors.Is(perr, views.ErrRunNotFound) {
		return api.RunResource{}, runError(err) // no run of either kind: the job's error says it
	}
	if perr != nil {
		return api.RunResource{}, perr
	}
	return api.RunResource{Pipeline: api.PipelineRecord(run)}, nil
}

// runError turns the errors views returns for a run argument into the
// CLI's: what is wrong, with what to do next.
func runError(err error) error {
	var ambiguous *views.AmbiguousIDError
	var notFound *views.JobNotFoundError
	switch {
	case errors.As(err, &ambiguous):
		return withHint(errcode.InvalidInput, ambiguous, "give more characters of it, or the whole id")
	case errors.As(err, &notFound):
		return withHint(errcode.NotFound, fmt.Errorf("no run %s", notFound.ID), "see: ductile run list (plugin runs) or ductile run list --kind pipeline")
	}
	return err
}

func runGet(c *cli.Context, e *env, l *ledger.Ledger) error {
	run, err := readRun(c, l, c.Args().First())
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, run)
	}
	if run.Pipeline != nil {
		printPipelineRunRecord(e, *run.Pipeline)
		return nil
	}
	printRunRecord(e, *run.Plugin)
	return nil
}

// epochText is epoch seconds as an RFC 3339 time (UTC, milliseconds).
func epochText(at float64) string {
	return time.Unix(0, int64(at*1e9)).UTC().Format("2006-01-02T15:04:05.000Z")
}

// printRunRecord prints a plugin run's record.
func printRunRecord(e *env, r views.RunRecord) {
	w := e.stdout
	fmt.Fprintf(w, "run        %s (plugin)\n", r.RunID)
	fmt.Fprintf(w, "plugin     %s %s\n", r.PluginID, r.EntryID)
	fmt.Fprintf(w, "status     %s (attempt %d of the chain %s)\n", r.Status, r.Attempt, r.RootRunID)
	fmt.Fprintf(w, "created    %s, updated %s\n", epochText(r.CreatedAt), epochText(r.UpdatedAt))
	if r.StartedAt != nil {
		fmt.Fprintf(w, "started    %s\n", epochText(*r.StartedAt))
	}
	if r.FinishedAt != nil {
		fmt.Fprintf(w, "finished   %s\n", epochText(*r.FinishedAt))
	}
	for _, kv := range [][2]*string{{ptr("task"), r.TaskID}, {ptr("trace"), r.TraceID}, {ptr("idempotency key"), r.IdempotencyKey}, {ptr("retry of"), r.ParentRunID}} {
		if kv[1] != nil {
			fmt.Fprintf(w, "%-10s %s\n", *kv[0], *kv[1])
		}
	}
	if line := progressText(r.Progress, r.Stage, r.Message); line != "" {
		fmt.Fprintf(w, "progress   %s\n", line)
	}
	if r.CancelRequested {
		fmt.Fprintf(w, "cancel     requested")
		if r.CancelRequestedAt != nil {
			fmt.Fprintf(w, " at %s", epochText(*r.CancelRequestedAt))
		}
		fmt.Fprintf(w, ": %s\n", orUnknown(deref(r.CancelReason)))
	}
	if r.Error != nil {
		fmt.Fprintf(w, "error      %s: %s\n", r.Error.Code, oneLine(r.Error.Message, 200))
	}
	fmt.Fprintf(w, "exports    %d (see: ductile run export %s)\n", r.ExportsCount, views.ShortID(r.RunID))
	if len(r.ResultRefs) > 0 {
		fmt.Fprintf(w, "results    %s\n", strings.Join(r.ResultRefs, ", "))
	}
	if len(r.Attempts) > 0 {
		fmt.Fprintf(w, "attempts:\n")
	}
	for _, a := range r.Attempts {
		fmt.Fprintf(w, "  #%d %-10s %s", a.Attempt, a.Status, epochText(a.StartedAt))
		if a.Worker != nil {
			fmt.Fprintf(w, " on %s (pid %d)", a.Worker.Name, a.Worker.PID)
		}
		if a.ExitCode != nil {
			fmt.Fprintf(w, " exit %d", *a.ExitCode)
		}
		if a.Error != nil {
			fmt.Fprintf(w, " %s: %s", a.Error.Code, oneLine(a.Error.Message, 100))
		}
		fmt.Fprintln(w)
	}
}

func ptr[T any](v T) *T { return &v }

// progressText is a run's progress, stage and message on one line ("" if
// it reported none).
func progressText(progress *float64, stage, message *string) string {
	var parts []string
	if progress != nil {
		parts = append(parts, fmt.Sprintf("%.0f%%", *progress*100))
	}
	if s := deref(stage); s != "" {
		parts = append(parts, "["+s+"]")
	}
	if m := deref(message); m != "" {
		parts = append(parts, shorten(m, 120))
	}
	return strings.Join(parts, " ")
}

// printPipelineRunRecord prints a pipeline run as run get shows it.
func printPipelineRunRecord(e *env, r api.PipelineRunRecord) {
	w := e.stdout
	fmt.Fprintf(w, "run        %s (pipeline %s)\n", r.RunID, r.Pipeline)
	fmt.Fprintf(w, "status     %s\n", r.Status)
	fmt.Fprintf(w, "started    %s by %s\n", r.StartedAt, r.Trigger)
	if r.FinishedAt != "" {
		fmt.Fprintf(w, "finished   %s\n", r.FinishedAt)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error      %s\n", r.Error)
	}
	fmt.Fprintf(w, "steps      %d runs: %s\n", len(r.ChildRunIDs), strings.Join(r.ChildRunIDs, ", "))
	fmt.Fprintf(w, "details: ductile pipeline status %s\n", r.RunID)
}

// runListOutput is what run list prints with --json: GET /runs's answer.
type runListOutput struct {
	Kind       string            `json:"kind"`
	Runs       []api.RunResource `json:"runs"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

func runList(c *cli.Context, e *env, l *ledger.Ledger) error {
	kind, pipeline := c.String("kind"), c.String("pipeline")
	if pipeline != "" && !c.IsSet("kind") {
		kind = api.RunKindPipeline
	}
	limit := c.Int("limit")
	if limit < 1 || limit > 1000 {
		return usagef("--limit %d: give 1 to 1000", limit)
	}
	out := runListOutput{Kind: kind, Runs: []api.RunResource{}}
	switch kind {
	case api.RunKindPipeline:
		if c.IsSet("task-id") || c.IsSet("plugin") || c.IsSet("cursor") {
			return usagef("--task-id, --plugin and --cursor list plugin runs: leave them out with --kind pipeline")
		}
		status := events.RunStatus(c.String("status"))
		if status != "" && !slices.Contains(events.RunStatuses(), status) {
			return usagef("--status %q: a pipeline run is running, succeeded or failed", status)
		}
		runs, err := views.FindRuns(c.Context, l, views.RunQuery{Pipeline: pipeline, Status: status, Limit: limit})
		if err != nil {
			return err
		}
		for _, r := range runs {
			out.Runs = append(out.Runs, api.RunResource{Pipeline: api.PipelineRecord(r)})
		}
	case api.RunKindPlugin:
		if pipeline != "" {
			return usagef("--pipeline lists pipeline runs: give --kind pipeline")
		}
		var status views.RunStatus
		if s := c.String("status"); s != "" {
			var err error
			if status, err = views.ParseRunStatus(s); err != nil {
				return usagef("--status %q: use one of %s", s, runStatusNames())
			}
		}
		page, err := views.ListRuns(c.Context, l, views.RunFilter{TaskID: c.String("task-id"), PluginID: c.String("plugin"),
			Status: status, After: c.String("cursor"), Limit: limit})
		if errors.Is(err, views.ErrBadCursor) {
			return usagef("--cursor %q is not one run list printed: give the next_cursor of the page before, as it was", c.String("cursor"))
		}
		if err != nil {
			return err
		}
		for i := range page.Runs {
			out.Runs = append(out.Runs, api.RunResource{Plugin: &page.Runs[i]})
		}
		out.NextCursor = page.Next
	default:
		return usagef("--kind %q: give plugin or pipeline", kind)
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if len(out.Runs) == 0 {
		fmt.Fprintf(e.stdout, "no %s runs match\n", kind)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if kind == api.RunKindPipeline {
		fmt.Fprintln(tw, "RUN\tPIPELINE\tSTATUS\tTRIGGER\tSTARTED\tERROR")
		for _, r := range out.Runs {
			p := r.Pipeline
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", views.ShortID(p.RunID), p.Pipeline, p.Status, p.Trigger, p.StartedAt, oneLine(p.Error, 60))
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "RUN\tPLUGIN\tENTRY\tSTATUS\tPROGRESS\tTASK\tCREATED")
	for _, r := range out.Runs {
		p := r.Plugin
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", views.ShortID(p.RunID), p.PluginID, p.EntryID, p.Status,
			oneLine(progressText(p.Progress, p.Stage, nil), 30), deref(p.TaskID), epochText(p.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.NextCursor != "" {
		fmt.Fprintf(e.stdout, "more: ductile run list --cursor %s (with the same filters)\n", out.NextCursor)
	}
	return nil
}

func runCancel(c *cli.Context, e *env, l *ledger.Ledger) error {
	// A pipeline step's cancel moves its run on: as job cancel, with the
	// config that runs the steps.
	eng, err := settingsEngine(c.Context, e, l)
	if err != nil {
		return err
	}
	dryRun := c.Bool("dry-run")
	res, err := eng.Cancel(c.Context, engine.Cancel{Job: c.Args().First(), Reason: c.String("reason"), By: events.ActorCLI, DryRun: dryRun})
	switch {
	case errors.Is(err, commands.ErrInvalidTransition):
		return hintf(errcode.Conflict, "see: ductile run get "+res.JobID, "run %s has ended (%s): only a queued or running run can be canceled", res.JobID, res.Before)
	case err != nil:
		return runError(err)
	}
	out := map[string]any{"run_id": res.JobID, "status_before": res.Before, "status": res.Status, "dry_run": dryRun}
	if !dryRun {
		// So that run list and queue show the cancel at once.
		if err := daemon.CatchUpUnlessHeld(c.Context, e.stateDir, l, e.quietLogger()); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	switch {
	case dryRun:
		fmt.Fprintf(e.stdout, "would cancel run %s, now %s (run without --dry-run to do it)\n", res.JobID, res.Before)
	case res.Status == events.StatusCancelRequested:
		fmt.Fprintf(e.stdout, "run %s: cancel requested; %s (follow it with: ductile run watch %s)\n", res.JobID, whoStops(c.Context, e, l, res.JobID), res.JobID)
	default:
		fmt.Fprintf(e.stdout, "run %s is %s\n", res.JobID, res.Status)
	}
	return nil
}

// runRetryOutput is what run retry prints with --json.
type runRetryOutput struct {
	RunID       string `json:"run_id,omitempty"` // the new run
	ParentRunID string `json:"parent_run_id"`
	Plugin      string `json:"plugin_id"`
	Entry       string `json:"entry_id"`
	Status      string `json:"status"` // queued | would enqueue
	RanBy       string `json:"ran_by"` // daemon | none
	DryRun      bool   `json:"dry_run,omitempty"`
}

func runRetry(c *cli.Context, e *env, l *ledger.Ledger) error {
	ctx := c.Context
	eng, err := currentEngine(ctx, e, l)
	if err != nil {
		return err
	}
	dryRun := c.Bool("dry-run")
	res, err := eng.Retry(ctx, engine.Redo{Job: c.Args().First(), By: events.ActorCLI, Check: true, DryRun: dryRun})
	j := res.Old
	switch {
	case j != nil && (errors.Is(err, commands.ErrInvalidTransition) || errors.Is(err, commands.ErrAlreadyRetried)):
		return retryRefused(ctx, l, j, err)
	case err != nil:
		return runError(eng.refused(err, false))
	}
	out := runRetryOutput{ParentRunID: j.JobID, Plugin: j.Plugin, Entry: j.Command, RanBy: eng.ranBy(), DryRun: dryRun}
	if dryRun {
		out.Status = "would enqueue"
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "would retry run %s (%s %s) as a new run; %s (run without --dry-run to do it)\n", j.JobID, j.Plugin, j.Command, eng.whoRuns())
		return nil
	}
	out.RunID, out.Status = cmp.Or(res.ExistingJobID, res.JobID), string(views.RunQueued)
	// So that run list and queue show the new run at once.
	if err := daemon.CatchUpUnlessHeld(ctx, e.stateDir, l, e.quietLogger()); err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "retried run %s as run %s (%s %s); %s\n", j.JobID, out.RunID, j.Plugin, j.Command, eng.whoRuns())
	fmt.Fprintf(e.stdout, "follow it with: ductile run watch %s\n", out.RunID)
	return nil
}

// runExportOutput is what run export prints with --json: GET
// /runs/{id}/export's answer.
type runExportOutput struct {
	Items     []views.ExportItem `json:"items"`
	NextAfter *string            `json:"next_after"`
}

func runExport(c *cli.Context, e *env, l *ledger.Ledger) error {
	limit := c.Int("limit")
	if limit < 1 || limit > 1000 {
		return usagef("--limit %d: give 1 to 1000", limit)
	}
	id, err := views.ResolveJobID(c.Context, l, c.Args().First())
	if err != nil {
		return runError(err)
	}
	items, next, err := views.RunExports(c.Context, l, id, c.String("after"), limit)
	if errors.Is(err, views.ErrBadCursor) {
		return usagef("--after %q: give the next_after a page printed, or an export item id", c.String("after"))
	}
	if err != nil {
		return runError(err)
	}
	out := runExportOutput{Items: items}
	if out.Items == nil {
		out.Items = []views.ExportItem{}
	}
	if next != "" {
		out.NextAfter = &next
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if len(items) == 0 {
		fmt.Fprintf(e.stdout, "run %s has no export items after %q\n", id, c.String("after"))
		return nil
	}
	for _, it := range items {
		printExportItem(e, it)
	}
	if next != "" {
		fmt.Fprintf(e.stdout, "more: ductile run export %s --after %s\n", views.ShortID(id), next)
	}
	return nil
}

// printExportItem prints one export item on a line (its text cut short).
func printExportItem(e *env, it views.ExportItem) {
	var what string
	switch it.Type {
	case events.ExportText:
		what = quote(oneLine(it.Text, 100))
	case events.ExportURL:
		what = it.URL
	case events.ExportBinaryURL:
		what = it.BinaryURL
	case events.ExportBinary:
		what = fmt.Sprintf("%d bytes", len(it.Binary))
	}
	if it.MIME != "" {
		what += " (" + it.MIME + ")"
	}
	if it.Description != "" {
		what += " — " + oneLine(it.Description, 60)
	}
	fmt.Fprintf(e.stdout, "%s  %s  #%d %-10s %s\n", it.ExportItemID, epochText(it.CreatedAt), it.Attempt, it.Type, what)
}
