package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

func jobCommand() *cli.Command {
	return &cli.Command{
		Name:  "job",
		Usage: "inspect, cancel and retry jobs",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list jobs, newest first",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "status", Usage: "only jobs in `STATUS` (" + statusNames() + ")"},
					&cli.StringFlag{Name: "plugin", Usage: "only jobs of `PLUGIN`"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` jobs"},
					jsonFlag(),
				},
				Action: func(c *cli.Context) error {
					if s := c.String("status"); s != "" && !slices.Contains(events.JobStatuses(), events.Status(s)) {
						return usagef("--status %q is not a job status: use one of %s", s, statusNames())
					}
					return withReadLedger(jobList)(c)
				},
			},
			{
				Name:      "inspect",
				Usage:     "show a job: its state, attempts, events and children (JOB_ID may be a unique prefix)",
				ArgsUsage: "JOB_ID",
				Description: "With -v (--verbose), also its baggage: its context, its parent's, and the paths\n" +
					"this step added (--json: context, parent_context, added_paths).",
				Flags:  []cli.Flag{jsonFlag()},
				Action: withReadLedger(jobInspect),
			},
			jobTreeCommand(),
			jobReplayCommand(),
			{
				Name:      "cancel",
				Usage:     "cancel a job: a queued one at once, a running one by stopping its plugin",
				ArgsUsage: "JOB_ID",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Value: "canceled from the CLI", Usage: "why, recorded with the job"},
					jsonFlag(), dryRunFlag(),
				},
				Action: withExistingLedger(jobCancel),
			},
			{
				Name:      "retry",
				Usage:     "enqueue a dead or canceled job again, as a new job linked to it",
				ArgsUsage: "JOB_ID",
				Description: "Enqueues a new job with the old one's plugin, command, payload, event, dedupe key\n" +
					"and parent, and the attempt budget the config gives the plugin now. The new job\n" +
					"records which job it retries (retry_of) and the old one which job retries it\n" +
					"(job.retried), so a job is retried once: retry the newest one again if need be.\n" +
					"Refused (exit 1) for a job that is not dead or canceled, and for a plugin or command\n" +
					"that is no longer loaded. The daemon runs the new job.",
				Flags:  []cli.Flag{jsonFlag(), dryRunFlag()},
				Action: withExistingLedger(jobRetry),
			},
			{
				Name:      "logs",
				Usage:     "show what a job's plugin wrote, with when: stderr (as it comes) and logs of each attempt",
				ArgsUsage: "JOB_ID",
				Description: "Each line is the time the core read it, the attempt, where it came from (stderr, or the level\n" +
					"of a log entry in the plugin's response) and the text. stderr is recorded while the plugin runs;\n" +
					"--follow prints lines as they come until the job is finished. --json prints an array, or with\n" +
					"--follow one object per line.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new lines until the job is finished (succeeded, dead or canceled)"},
					jsonFlag(),
				},
				Action: withReadLedger(jobLogs),
			},
		},
	}
}

func jobList(c *cli.Context, e *env, l *ledger.Ledger) error {
	rows, err := views.ListJobs(c.Context, l, views.JobFilter{Status: events.Status(c.String("status")), Plugin: c.String("plugin"), Limit: c.Int("limit")})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, rows)
	}
	printJobTable(e, rows)
	return nil
}

func printJobTable(e *env, rows []views.Job) {
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no jobs")
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPLUGIN\tCOMMAND\tSTATUS\tATTEMPT\tCREATED\tLAST ERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", views.ShortID(r.ID), r.Plugin, r.Command, r.Status, r.Attempt, r.MaxAttempts,
			r.CreatedAt[:19]+"Z", oneLine(deref(r.LastError), 60))
	}
	tw.Flush()
}

// jobError turns the errors views returns for a job argument into the
// CLI's: what is wrong, with what to do next.
func jobError(err error) error {
	var ambiguous *views.AmbiguousIDError
	var notFound *views.JobNotFoundError
	switch {
	case errors.As(err, &ambiguous):
		return withHint(errcode.InvalidInput, ambiguous, "give more characters of it, or the whole id")
	case errors.As(err, &notFound) && notFound.TooShort:
		return withHint(errcode.NotFound, notFound, fmt.Sprintf("give the short id job list prints, or at least %d characters of it; see: ductile job list", views.MinPrefix))
	case errors.As(err, &notFound):
		return withHint(errcode.NotFound, notFound, "see: ductile job list")
	}
	return err
}

func jobInspect(c *cli.Context, e *env, l *ledger.Ledger) error {
	in, err := views.Inspect(c.Context, l, c.Args().First())
	if err != nil {
		return jobError(err)
	}
	var baggage *views.Baggage
	if c.Bool("verbose") { // the global -v, wherever it is given

		b, err := views.ReadBaggage(c.Context, l, in.Job.ID)
		if err != nil {
			return jobError(err)
		}
		baggage = &b
	}
	if c.Bool("json") {
		if baggage != nil {
			return printJSON(e.stdout, struct {
				*views.Inspection
				*views.Baggage
			}{in, baggage})
		}
		return printJSON(e.stdout, in)
	}
	j := in.Job
	w := e.stdout
	fmt.Fprintf(w, "job        %s\n", j.ID)
	fmt.Fprintf(w, "plugin     %s %s\n", j.Plugin, j.Command)
	fmt.Fprintf(w, "status     %s (attempt %d of %d)\n", j.Status, j.Attempt, j.MaxAttempts)
	fmt.Fprintf(w, "submitted  by %s at %s\n", j.SubmittedBy, j.CreatedAt)
	if j.NextRetryAt != nil {
		fmt.Fprintf(w, "retry at   %s\n", *j.NextRetryAt)
	}
	if j.LastError != nil {
		fmt.Fprintf(w, "last error %s\n", *j.LastError)
	}
	if cv := in.Cancel; cv != nil {
		what := "canceled  "
		if cv.Pending {
			what = "cancel    " // requested, the plugin not stopped yet
		}
		fmt.Fprintf(w, "%s by %s at %s: %s", what, orUnknown(cv.By), cv.RequestedAt, orUnknown(cv.Reason))
		switch {
		case cv.Pending:
			fmt.Fprintf(w, " (requested; the process running it stops its plugin)")
		case cv.Ended != "":
			fmt.Fprintf(w, " (ended: %s)", cv.Ended)
		}
		fmt.Fprintln(w)
	}
	if in.RetryOf != "" {
		fmt.Fprintf(w, "retry of   %s\n", in.RetryOf)
	}
	if in.RetriedAs != "" {
		fmt.Fprintf(w, "retried as %s\n", in.RetriedAs)
	}
	if in.ReplayOf != "" {
		fmt.Fprintf(w, "replay of  %s\n", in.ReplayOf)
	}
	for _, r := range in.ReplayedAs {
		fmt.Fprintf(w, "replayed as %s\n", r)
	}
	if j.ParentJobID != nil {
		fmt.Fprintf(w, "parent     %s (event %s)\n", *j.ParentJobID, deref(j.SourceEventID))
	}
	if in.Depth > 0 {
		fmt.Fprintf(w, "depth      %d\n", in.Depth)
	}
	for _, d := range in.DroppedRoutes {
		if d.Limit == 0 { // not for its depth: its plugin cannot run
			fmt.Fprintf(w, "dropped    route %s -> %s %s: %s\n", d.EventType, d.Plugin, d.Command, d.Reason)
			continue
		}
		fmt.Fprintf(w, "dropped    route %s -> %s %s at depth %d (limit %d): %s\n", d.EventType, d.Plugin, d.Command, d.Depth, d.Limit, d.Reason)
	}
	if j.DedupeKey != nil {
		fmt.Fprintf(w, "dedupe key %s\n", *j.DedupeKey)
	}
	if len(j.Payload) > 0 {
		fmt.Fprintf(w, "payload    %s\n", j.Payload)
	}
	fmt.Fprintf(w, "attempts:\n")
	for _, a := range in.Attempts {
		fmt.Fprintf(w, "  #%d %-10s %s", a.Attempt, a.Status, a.StartedAt)
		if a.DurationMS != nil {
			fmt.Fprintf(w, " (%d ms)", *a.DurationMS)
		}
		if a.Worker != "" {
			fmt.Fprintf(w, " on %s", a.Worker)
		}
		if a.Error != nil {
			fmt.Fprintf(w, " %s", oneLine(*a.Error, 100))
		}
		fmt.Fprintln(w)
		if len(a.Response) > 0 {
			fmt.Fprintf(w, "      response %s\n", oneLine(string(a.Response), 200))
		}
	}
	printRunOfJob(e, in)
	fmt.Fprintf(w, "events:\n")
	for _, ev := range in.Events {
		fmt.Fprintf(w, "  %8d  %s  v%-3d %s\n", ev.Seq, ev.RecordedAt, ev.Version, ev.Type)
	}
	if baggage != nil {
		printBaggage(e, *baggage)
	}
	if len(in.Children) > 0 {
		fmt.Fprintf(w, "children:\n")
		for _, ch := range in.Children {
			fmt.Fprintf(w, "  %s  %s %s  %s\n", views.ShortID(ch.ID), ch.Plugin, ch.Command, ch.Status)
		}
	}
	return nil
}

// jobLogs prints a job's logs (views.JobLogs). --follow prints lines as
// their events are appended, until the job is finished; an interrupt ends
// it quietly.
func jobLogs(c *cli.Context, e *env, l *ledger.Ledger) error {
	ctx, asJSON := c.Context, c.Bool("json")
	id, err := views.ResolveJobID(ctx, l, c.Args().First())
	if err != nil {
		return jobError(err)
	}
	noLogs := func() { fmt.Fprintf(e.stdout, "job %s has no plugin logs or stderr\n", id) }
	if !c.Bool("follow") {
		lines, err := views.JobLogs(ctx, l, id)
		if err != nil {
			return jobError(err)
		}
		if asJSON {
			return printJSON(e.stdout, lines)
		}
		if len(lines) == 0 {
			noLogs()
		}
		return printLogLines(e, lines, false)
	}
	printed := false
	err = views.FollowJobLogs(ctx, l, id, func(line views.LogLine) error {
		printed = true
		return printLogLines(e, []views.LogLine{line}, asJSON)
	})
	if ctx.Err() != nil {
		return nil // interrupted: that is how --follow ends early
	}
	if err != nil {
		return jobError(err)
	}
	if !printed && !asJSON {
		noLogs()
	}
	return nil
}

// printLogLines prints lines as text, or as one JSON object per line.
func printLogLines(e *env, lines []views.LogLine, asJSON bool) error {
	for _, l := range lines {
		var err error
		if asJSON {
			err = printJSONLine(e, l)
		} else {
			_, err = fmt.Fprintln(e.stdout, logLineText(l))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// printJSONLine prints v as one line of JSON.
func printJSONLine(e *env, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

// logLineText is a log line as text: when it was read, the attempt, where
// it came from (stderr, or a log entry's level) and the message.
func logLineText(l views.LogLine) string {
	at := l.At
	if t, err := time.Parse(time.RFC3339Nano, l.At); err == nil {
		at = t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	tag := l.Stream
	if l.Level != "" {
		tag = l.Level
	}
	return fmt.Sprintf("%s #%d %-6s %s", at, l.Attempt, tag, strings.TrimSuffix(l.Message, "\r"))
}

// statusNames lists the job statuses, comma-separated, for help and errors.
func statusNames() string {
	var names []string
	for _, s := range events.JobStatuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "(not given)"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func jobCancel(c *cli.Context, e *env, l *ledger.Ledger) error {
	// A pipeline job's cancel moves its run on: the steps it enqueues are
	// built with the config that runs them.
	eng, err := settingsEngine(c.Context, e, l)
	if err != nil {
		return err
	}
	res, err := eng.Cancel(c.Context, engine.Cancel{Job: c.Args().First(), Reason: c.String("reason"), By: events.ActorCLI, DryRun: c.Bool("dry-run")})
	id := res.JobID
	switch {
	case errors.Is(err, commands.ErrInvalidTransition):
		return conflictf("job %s is %s: only a queued or running job can be canceled", id, res.Before)
	case err != nil:
		return jobError(err)
	}
	out := map[string]any{"job_id": id, "status_before": res.Before, "dry_run": c.Bool("dry-run"), "status": res.Status}
	if !c.Bool("dry-run") {
		// So that job list and queue show the cancel at once.
		if err := daemon.CatchUpUnlessHeld(c.Context, e.stateDir, l, e.quietLogger()); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	switch {
	case c.Bool("dry-run"):
		fmt.Fprintf(e.stdout, "would cancel job %s, now %s (run without --dry-run to do it)\n", id, res.Before)
	case res.Status == events.StatusCancelRequested:
		fmt.Fprintf(e.stdout, "job %s: cancel requested; %s (see: ductile job inspect %s)\n", id, whoStops(c.Context, e, l, id), id)
	default:
		fmt.Fprintf(e.stdout, "job %s is %s\n", id, res.Status)
	}
	return nil
}

// whoStops says who acts on job id's cancel request: the process that
// started its attempt (job.started's pid), which watches the job's stream,
// or, once that process is gone, the next one to open the state directory,
// whose recovery records the job canceled.
func whoStops(ctx context.Context, e *env, l *ledger.Ledger, id string) string {
	pid, err := views.RunnerPID(ctx, l, id)
	if err != nil || pid <= 0 {
		return "the process running it stops its plugin"
	}
	if h, err := daemon.Holder(e.stateDir); err == nil && h.Daemon() && h.PID == pid {
		return fmt.Sprintf("the daemon (pid %d) stops its plugin", pid)
	}
	if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
		return fmt.Sprintf("the ductile plugin run running it (pid %d) stops its plugin", pid)
	}
	return fmt.Sprintf("the process that ran it (pid %d) is gone: the next ductile system start records it canceled", pid)
}

// retryOutput is what job retry prints with --json.
type retryOutput struct {
	JobID         string `json:"job_id,omitempty"` // the new job
	RetryOf       string `json:"retry_of"`
	Plugin        string `json:"plugin"`
	Command       string `json:"command"`
	Status        string `json:"status"` // queued | deduped | would enqueue
	ExistingJobID string `json:"existing_job_id,omitempty"`
	RanBy         string `json:"ran_by"` // daemon | none (no daemon is running)
	DryRun        bool   `json:"dry_run,omitempty"`
}

func jobRetry(c *cli.Context, e *env, l *ledger.Ledger) error {
	ctx := c.Context
	eng, err := currentEngine(ctx, e, l)
	if err != nil {
		return err
	}
	res, err := eng.Retry(ctx, engine.Redo{Job: c.Args().First(), By: events.ActorCLI, Check: true, DryRun: c.Bool("dry-run")})
	j := res.Old
	switch {
	case j != nil && (errors.Is(err, commands.ErrInvalidTransition) || errors.Is(err, commands.ErrAlreadyRetried)):
		return retryRefused(ctx, l, j, err)
	case err != nil:
		return jobError(eng.refused(err, false))
	}
	out := retryOutput{RetryOf: j.JobID, Plugin: j.Plugin, Command: j.Command, RanBy: eng.ranBy()}
	if c.Bool("dry-run") {
		out.Status, out.DryRun = "would enqueue", true
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "would retry job %s (%s, %s %s) as a new job; %s (run without --dry-run to do it)\n",
			j.JobID, j.Status, j.Plugin, j.Command, eng.whoRuns())
		return nil
	}
	out.JobID, out.ExistingJobID, out.Status = res.JobID, res.ExistingJobID, string(events.StatusQueued)
	if res.Deduped {
		out.Status = "deduped"
	}
	// So that job list and queue show the new job at once.
	if err := daemon.CatchUpUnlessHeld(ctx, e.stateDir, l, e.quietLogger()); err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if res.Deduped {
		fmt.Fprintf(e.stdout, "not retried: job %s with dedupe key %q already covers it\n", res.ExistingJobID, j.DedupeKey)
		return nil
	}
	fmt.Fprintf(e.stdout, "retried job %s as job %s (%s %s); %s\n", j.JobID, res.JobID, j.Plugin, j.Command, eng.whoRuns())
	fmt.Fprintf(e.stdout, "follow it with: ductile job inspect %s\n", res.JobID)
	return nil
}

// retryRefused explains why job j cannot be retried, and what to do instead.
func retryRefused(ctx context.Context, l *ledger.Ledger, j *commands.Job, err error) error {
	var retried *commands.RetriedError
	if errors.As(err, &retried) {
		status := events.Status("unknown")
		if r, err := views.JobState(ctx, l, retried.RetryJobID); err == nil {
			status = r.Status
		}
		return hintf(errcode.Conflict, "retry that one if need be: ductile job retry "+retried.RetryJobID,
			"job %s was retried already, as job %s (now %s)", j.JobID, retried.RetryJobID, status)
	}
	switch j.Status {
	case events.StatusQueued:
		return hintf(errcode.Conflict, "see: ductile job inspect "+j.JobID, "job %s is queued: it has not given up yet, so there is nothing to retry", j.JobID)
	case events.StatusRunning, events.StatusCancelRequested:
		return hintf(errcode.Conflict, "wait for it, or stop it first: ductile job cancel "+j.JobID, "job %s is %s: only a dead or canceled job can be retried", j.JobID, j.Status)
	case events.StatusSucceeded:
		return hintf(errcode.Conflict, fmt.Sprintf("to run it again, enqueue a new job: ductile plugin run %s --command %s", j.Plugin, j.Command),
			"job %s succeeded: only a dead or canceled job can be retried", j.JobID)
	}
	return failf("job %s cannot be retried: %v", j.JobID, err)
}
