package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

func jobCommand() *cli.Command {
	return &cli.Command{
		Name:  "job",
		Usage: "inspect jobs",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list jobs, newest first",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "status", Usage: "only jobs in `STATUS` (queued, running, succeeded, dead, canceled)"},
					&cli.StringFlag{Name: "plugin", Usage: "only jobs of `PLUGIN`"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: "at most `N` jobs"},
					jsonFlag,
				},
				Action: withLedger(jobList),
			},
			{
				Name:      "inspect",
				Usage:     "show a job: its state, attempts, events and children",
				ArgsUsage: "JOB_ID",
				Flags:     []cli.Flag{jsonFlag},
				Action:    withLedger(jobInspect),
			},
			{
				Name:      "cancel",
				Usage:     "cancel a job: a queued one at once, a running one by stopping its plugin",
				ArgsUsage: "JOB_ID",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Value: "canceled from the CLI", Usage: "why, recorded with the job"},
					jsonFlag, dryRunFlag,
				},
				Action: withLedger(jobCancel),
			},
			{
				Name:      "logs",
				Usage:     "show what a job's plugin wrote: stderr and logs of each attempt",
				ArgsUsage: "JOB_ID",
				Flags:     []cli.Flag{jsonFlag},
				Action:    withLedger(jobLogs),
			},
		},
	}
}

// jobRow is a job_queue row as the CLI prints it.
type jobRow struct {
	ID            string          `json:"job_id"`
	Seq           int64           `json:"seq"`
	Plugin        string          `json:"plugin"`
	Command       string          `json:"command"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Status        string          `json:"status"`
	Attempt       int64           `json:"attempt"`
	MaxAttempts   int64           `json:"max_attempts"`
	SubmittedBy   string          `json:"submitted_by"`
	DedupeKey     *string         `json:"dedupe_key,omitempty"`
	CreatedAt     string          `json:"created_at"`
	StartedAt     *string         `json:"started_at,omitempty"`
	CompletedAt   *string         `json:"completed_at,omitempty"`
	NextRetryAt   *string         `json:"next_retry_at,omitempty"`
	LastError     *string         `json:"last_error,omitempty"`
	ParentJobID   *string         `json:"parent_job_id,omitempty"`
	SourceEventID *string         `json:"source_event_id,omitempty"`
	CorrelationID string          `json:"correlation_id"`
	UpdatedSeq    int64           `json:"updated_seq"`
}

func toJobRow(r queries.GetJobRow) jobRow {
	var payload json.RawMessage
	if r.Payload != nil {
		payload = json.RawMessage(*r.Payload)
	}
	return jobRow{r.ID, r.Seq, r.Plugin, r.Command, payload, r.Status, r.Attempt, r.MaxAttempts, r.SubmittedBy,
		r.DedupeKey, r.CreatedAt, r.StartedAt, r.CompletedAt, r.NextRetryAt, r.LastError, r.ParentJobID,
		r.SourceEventID, r.CorrelationID, r.UpdatedSeq}
}

func jobList(c *cli.Context, e *env, l *ledger.Ledger) error {
	rows := []jobRow{}
	err := l.Read(c.Context, func(conn *sqlite.Conn) error {
		return queries.ListJobs(conn, queries.ListJobsParams{Status: c.String("status"), Plugin: c.String("plugin"), MaxJobs: int64(c.Int("limit"))},
			func(r queries.ListJobsRow) error { rows = append(rows, toJobRow(queries.GetJobRow(r))); return nil })
	})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, rows)
	}
	printJobTable(e, rows)
	return nil
}

func printJobTable(e *env, rows []jobRow) {
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "no jobs")
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPLUGIN\tCOMMAND\tSTATUS\tATTEMPT\tCREATED\tLAST ERROR")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", r.ID, r.Plugin, r.Command, r.Status, r.Attempt, r.MaxAttempts,
			r.CreatedAt[:19]+"Z", oneLine(deref(r.LastError), 60))
	}
	tw.Flush()
}

// attemptRow is a job_log row as the CLI prints it.
type attemptRow struct {
	Attempt         int64           `json:"attempt"`
	Status          string          `json:"status"`
	Kind            *string         `json:"kind,omitempty"`
	Response        json.RawMessage `json:"response,omitempty"`
	Stdout          *string         `json:"stdout,omitempty"`
	Stderr          *string         `json:"stderr,omitempty"`
	StderrTruncated bool            `json:"stderr_truncated,omitempty"`
	Error           *string         `json:"error,omitempty"`
	ExitCode        *int64          `json:"exit_code,omitempty"`
	StartedAt       string          `json:"started_at"`
	CompletedAt     *string         `json:"completed_at,omitempty"`
	DurationMS      *int64          `json:"duration_ms,omitempty"`
}

type inspection struct {
	Job      jobRow       `json:"job"`
	Attempts []attemptRow `json:"attempts"`
	Events   []eventLine  `json:"events"`
	Children []jobRow     `json:"children"`
}

func inspectJob(ctx context.Context, l *ledger.Ledger, id string) (*inspection, error) {
	in := &inspection{Attempts: []attemptRow{}, Events: []eventLine{}, Children: []jobRow{}}
	found := false
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		if err := queries.GetJob(conn, id, func(r queries.GetJobRow) error { in.Job, found = toJobRow(r), true; return nil }); err != nil {
			return err
		}
		if err := queries.ListJobAttempts(conn, id, func(r queries.ListJobAttemptsRow) error {
			a := attemptRow{Attempt: r.Attempt, Status: r.Status, Kind: r.Kind, Stdout: r.Stdout, Stderr: r.Stderr,
				StderrTruncated: r.StderrTruncated != 0, Error: r.LastError, ExitCode: r.ExitCode, StartedAt: r.StartedAt,
				CompletedAt: r.CompletedAt, DurationMS: r.DurationMs}
			if r.Result != nil {
				a.Response = json.RawMessage(*r.Result)
			}
			in.Attempts = append(in.Attempts, a)
			return nil
		}); err != nil {
			return err
		}
		return queries.ListChildJobs(conn, id, func(r queries.ListChildJobsRow) error {
			in.Children = append(in.Children, toJobRow(queries.GetJobRow(r)))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, err
	}
	if !found && len(evs) == 0 {
		return nil, failf("no job %s (see: ductile job list)", id)
	}
	for _, ev := range evs {
		in.Events = append(in.Events, toEventLine(ev))
	}
	return in, nil
}

func jobInspect(c *cli.Context, e *env, l *ledger.Ledger) error {
	in, err := inspectJob(c.Context, l, c.Args().First())
	if err != nil {
		return err
	}
	if c.Bool("json") {
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
	if j.ParentJobID != nil {
		fmt.Fprintf(w, "parent     %s (event %s)\n", *j.ParentJobID, deref(j.SourceEventID))
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
		if a.Error != nil {
			fmt.Fprintf(w, " %s", oneLine(*a.Error, 100))
		}
		fmt.Fprintln(w)
		if len(a.Response) > 0 {
			fmt.Fprintf(w, "      response %s\n", oneLine(string(a.Response), 200))
		}
	}
	fmt.Fprintf(w, "events:\n")
	for _, ev := range in.Events {
		fmt.Fprintf(w, "  %8d  %s  v%-3d %s\n", ev.Seq, ev.RecordedAt, ev.Version, ev.Type)
	}
	if len(in.Children) > 0 {
		fmt.Fprintf(w, "children:\n")
		for _, ch := range in.Children {
			fmt.Fprintf(w, "  %s  %s %s  %s\n", ch.ID, ch.Plugin, ch.Command, ch.Status)
		}
	}
	return nil
}

func jobLogs(c *cli.Context, e *env, l *ledger.Ledger) error {
	in, err := inspectJob(c.Context, l, c.Args().First())
	if err != nil {
		return err
	}
	type logLine struct {
		Attempt int64  `json:"attempt"`
		Stream  string `json:"stream"` // stderr | plugin
		Level   string `json:"level,omitempty"`
		Message string `json:"message"`
	}
	lines := []logLine{}
	for _, a := range in.Attempts {
		var resp struct {
			Logs []struct {
				Level   string `json:"level"`
				Message string `json:"message"`
			} `json:"logs"`
		}
		_ = json.Unmarshal(a.Response, &resp)
		for _, lg := range resp.Logs {
			lines = append(lines, logLine{a.Attempt, "plugin", lg.Level, lg.Message})
		}
		if a.Stderr != nil {
			for _, s := range strings.Split(strings.TrimRight(*a.Stderr, "\n"), "\n") {
				lines = append(lines, logLine{Attempt: a.Attempt, Stream: "stderr", Message: s})
			}
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, lines)
	}
	if len(lines) == 0 {
		fmt.Fprintf(e.stdout, "job %s has no plugin logs or stderr\n", in.Job.ID)
	}
	for _, l := range lines {
		tag := l.Stream
		if l.Level != "" {
			tag = l.Level
		}
		fmt.Fprintf(e.stdout, "#%d %-6s %s\n", l.Attempt, tag, l.Message)
	}
	return nil
}

func queueCommand() *cli.Command {
	return &cli.Command{
		Name:   "queue",
		Usage:  "show pending and running jobs, and counts by status",
		Flags:  []cli.Flag{jsonFlag},
		Action: withLedger(queueShow),
	}
}

func queueShow(c *cli.Context, e *env, l *ledger.Ledger) error {
	out := struct {
		Counts map[string]int64 `json:"counts"`
		Active []jobRow         `json:"active"`
	}{Counts: map[string]int64{}, Active: []jobRow{}}
	err := l.ReadSnapshot(c.Context, func(conn *sqlite.Conn) error {
		if err := queries.CountJobsByStatus(conn, func(r queries.CountJobsByStatusRow) error { out.Counts[r.Status] = r.Jobs; return nil }); err != nil {
			return err
		}
		for _, status := range []string{events.StatusRunning, events.StatusCancelRequested, events.StatusQueued} {
			err := queries.ListJobs(conn, queries.ListJobsParams{Status: status, MaxJobs: 200}, func(r queries.ListJobsRow) error {
				out.Active = append(out.Active, toJobRow(queries.GetJobRow(r)))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "queued %d, running %d, succeeded %d, dead %d, canceled %d\n", out.Counts["queued"],
		out.Counts["running"]+out.Counts["cancel_requested"], out.Counts["succeeded"], out.Counts["dead"], out.Counts["canceled"])
	if len(out.Active) > 0 {
		printJobTable(e, out.Active)
	}
	return nil
}

func toEventLine(ev ledger.Event) eventLine {
	return eventLine{ev.Seq, ev.Stream, ev.Version, ev.Type, ev.Data, ev.Meta, ev.RecordedAt.UTC().Format(ledger.TimeFormat), fmt.Sprintf("%x", ev.Hash)}
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
	id := c.Args().First()
	evs, err := l.ReadStream(c.Context, events.JobStream(id))
	if err != nil {
		return err
	}
	j, err := commands.FoldJob(evs)
	if errors.Is(err, commands.ErrJobNotFound) {
		return failf("no job %s (see: ductile job list)", id)
	}
	if err != nil {
		return err
	}
	out := map[string]any{"job_id": id, "status_before": j.Status, "dry_run": c.Bool("dry-run")}
	status := j.Status
	if !c.Bool("dry-run") {
		status, err = commands.CancelJob(c.Context, l, commands.Cancel{JobID: id, Reason: c.String("reason"), Actor: commands.ByCLI, Now: time.Now()})
		if errors.Is(err, commands.ErrInvalidTransition) {
			return failf("job %s is %s: only a queued or running job can be canceled", id, j.Status)
		}
		if err != nil {
			return err
		}
	}
	out["status"] = status
	if h, err := daemon.Holder(e.stateDir); err == nil && !h.Held && !c.Bool("dry-run") {
		// Nobody else will bring the projections up to date: do it, so job
		// list and queue show the cancel at once.
		if _, err := projections.New(l, projections.Options{Logger: e.quietLogger()}).CatchUp(c.Context); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	switch {
	case c.Bool("dry-run"):
		fmt.Fprintf(e.stdout, "would cancel job %s, now %s (run without --dry-run to do it)\n", id, j.Status)
	case status == events.StatusCancelRequested:
		fmt.Fprintf(e.stdout, "job %s: cancel requested; whoever runs it stops its plugin (see: ductile job inspect %s)\n", id, id)
	default:
		fmt.Fprintf(e.stdout, "job %s is %s\n", id, status)
	}
	return nil
}
