package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
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
				Flags:     []cli.Flag{jsonFlag()},
				Action:    withReadLedger(jobInspect),
			},
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
		return projections.ListJobs(conn, projections.JobFilter{Status: c.String("status"), Plugin: c.String("plugin"), Limit: c.Int("limit")},
			func(r queries.GetJobRow) error { rows = append(rows, toJobRow(r)); return nil })
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
	Job       jobRow       `json:"job"`
	Cancel    *cancelView  `json:"cancel,omitempty"`
	RetryOf   string       `json:"retry_of,omitempty"`   // the job this one retries
	RetriedAs string       `json:"retried_as,omitempty"` // the job that retries this one
	Attempts  []attemptRow `json:"attempts"`
	Events    []eventLine  `json:"events"`
	Children  []jobRow     `json:"children"`
}

// cancelView is a job's cancel, from its stream: who asked, when and why,
// and how the job ended if that says more.
type cancelView struct {
	Reason      string `json:"reason"`
	By          string `json:"by,omitempty"`
	RequestedAt string `json:"requested_at"`
	Pending     bool   `json:"pending"`         // requested, the plugin not stopped yet
	Ended       string `json:"ended,omitempty"` // job.canceled's reason, when the request's differs
}

// linksFromEvents fills in what only the job's stream holds: its cancel and
// its retry links.
func (in *inspection) linksFromEvents(evs []ledger.Event) {
	for _, ev := range evs {
		switch ev.Type {
		case events.JobEnqueued:
			var d events.Enqueued
			if json.Unmarshal(ev.Data, &d) == nil {
				in.RetryOf = d.RetryOf
			}
		case events.JobRetried:
			var d events.Retried
			if json.Unmarshal(ev.Data, &d) == nil {
				in.RetriedAs = d.RetryJobID
			}
		case events.JobCancelRequested, events.JobCanceled:
			var d events.Canceled
			_ = json.Unmarshal(ev.Data, &d)
			if in.Cancel != nil { // the end of a requested cancel
				in.Cancel.Pending = false
				if d.Reason != in.Cancel.Reason {
					in.Cancel.Ended = d.Reason
				}
				continue
			}
			m, _ := ev.Metadata()
			in.Cancel = &cancelView{Reason: d.Reason, By: m.Actor, RequestedAt: ev.RecordedAtText(), Pending: ev.Type == events.JobCancelRequested}
		}
	}
}

// resolveJobID turns a JOB_ID argument into a job's id: the id itself, or
// the one id it is a prefix of (at least minPrefix characters), searched on
// the job streams of the ledger (not a projection, so a job just enqueued
// by another process is found).
func resolveJobID(ctx context.Context, l *ledger.Ledger, arg string) (string, error) {
	const minPrefix, shown = 4, 5
	find := func(from, until string) (ids []string, err error) {
		err = l.Read(ctx, func(conn *sqlite.Conn) error {
			return queries.FindStreamsByPrefix(conn, queries.FindStreamsByPrefixParams{From: from, Until: until, MaxStreams: shown + 1},
				func(stream string) error { ids = append(ids, events.JobIDFromStream(stream)); return nil })
		})
		return ids, err
	}
	candidates := []string{arg}
	if lower := strings.ToLower(arg); lower != arg {
		candidates = append(candidates, lower) // ids are lower case
	}
	for _, id := range candidates {
		stream := events.JobStream(id)
		exact, err := find(stream, stream+"\x00")
		if err != nil {
			return "", err
		}
		if len(exact) > 0 {
			return id, nil
		}
		if len(id) < minPrefix {
			continue
		}
		ids, err := find(stream, prefixEnd(stream))
		if err != nil {
			return "", err
		}
		switch {
		case len(ids) == 1:
			return ids[0], nil
		case len(ids) > shown:
			return "", hintf(codeUsage, "give more characters", "job id prefix %q is ambiguous: it matches %s and more", arg, strings.Join(ids[:shown], ", "))
		case len(ids) > 1:
			return "", hintf(codeUsage, "give more characters", "job id prefix %q is ambiguous: it matches %s", arg, strings.Join(ids, ", "))
		}
	}
	if len(arg) < minPrefix {
		return "", hintf(codeNotFound, fmt.Sprintf("a job id prefix needs at least %d characters; see: ductile job list", minPrefix), "no job %s", arg)
	}
	return "", hintf(codeNotFound, "see: ductile job list", "no job %s", arg)
}

// prefixEnd is the least string greater than every string that starts with
// prefix (byte order, as SQLite compares text).
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for len(b) > 0 && b[len(b)-1] == 0xff {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return "\xff\xff\xff\xff" // nothing above: every stream name is valid UTF-8
	}
	b[len(b)-1]++
	return string(b)
}

func inspectJob(ctx context.Context, l *ledger.Ledger, arg string) (*inspection, error) {
	id, err := resolveJobID(ctx, l, arg)
	if err != nil {
		return nil, err
	}
	in := &inspection{Attempts: []attemptRow{}, Events: []eventLine{}, Children: []jobRow{}}
	found := false
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
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
		return nil, hintf(codeNotFound, "see: ductile job list", "no job %s", id)
	}
	if !found { // enqueued by another process, not projected yet
		in.Job.ID = id
	}
	for _, ev := range evs {
		in.Events = append(in.Events, toEventLine(ev))
	}
	in.linksFromEvents(evs)
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
	if cv := in.Cancel; cv != nil {
		what := "canceled  "
		if cv.Pending {
			what = "cancel    " // requested, the plugin not stopped yet
		}
		fmt.Fprintf(w, "%s by %s at %s: %s", what, orUnknown(cv.By), cv.RequestedAt, orUnknown(cv.Reason))
		switch {
		case cv.Pending:
			fmt.Fprintf(w, " (requested; whoever runs it stops its plugin)")
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

// logLine is one line job logs prints: a line the plugin wrote to stderr,
// or an entry of its response's logs.
type logLine struct {
	Attempt int    `json:"attempt"`
	At      string `json:"at"`     // when the core read it (RFC 3339, UTC)
	Stream  string `json:"stream"` // stderr | plugin
	Level   string `json:"level,omitempty"`
	Message string `json:"message"`
}

// jobLogs prints a job's logs from its stream, the source of truth: the
// stderr lines streamed while an attempt ran (job.stderr_written, each with
// the time it was read), then at the attempt's end the stderr lines that
// were not streamed (over the bound, or recorded before streaming existed)
// and the response's logs, both at the time the attempt ended. --follow
// prints lines as their events are appended, woken by the ledger's
// Changed(), until the job is finished.
func jobLogs(c *cli.Context, e *env, l *ledger.Ledger) error {
	ctx, follow := c.Context, c.Bool("follow")
	asJSON := c.Bool("json")
	id, err := resolveJobID(ctx, l, c.Args().First())
	if err != nil {
		return err
	}
	stream := events.JobStream(id)
	changed := l.Changed()
	head, err := l.LastSeq(ctx)
	if err != nil {
		return err
	}
	evs, err := l.ReadStream(ctx, stream)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return hintf(codeNotFound, "see: ductile job list", "no job %s", id)
	}
	lg := jobLog{streamed: map[int]map[int]bool{}}
	var lines []logLine
	for _, ev := range evs {
		if lines, err = lg.add(lines, ev); err != nil {
			return err
		}
	}
	if !follow {
		if asJSON {
			return printJSON(e.stdout, append([]logLine{}, lines...))
		}
		if len(lines) == 0 {
			fmt.Fprintf(e.stdout, "job %s has no plugin logs or stderr\n", id)
		}
		return printLogLines(e, lines, false)
	}
	after := max(head, lg.lastSeq)
	printed := false
	for {
		if err := printLogLines(e, lines, asJSON); err != nil {
			return err
		}
		printed = printed || len(lines) > 0
		if lg.finished {
			if !printed && !asJSON {
				fmt.Fprintf(e.stdout, "job %s has no plugin logs or stderr\n", id)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: that is how --follow ends early
		case <-changed:
		}
		// Take the next wake-up first, then read: no append is missed.
		changed = l.Changed()
		if head, err = l.LastSeq(ctx); err != nil {
			return followErr(ctx, err)
		}
		lines = lines[:0]
		for {
			last, err := l.ReadFrom(ctx, after, 1000, ledger.Filter{Stream: stream}, func(ev ledger.Event) error {
				var err error
				lines, err = lg.add(lines, ev)
				return err
			})
			if err != nil {
				return followErr(ctx, err)
			}
			if last == after {
				break
			}
			after = last
		}
		// Every event up to head was visible to the reads: the next look
		// starts after it, not after this job's last event.
		after = max(after, head)
	}
}

// followErr is what an error while following means: none if it came from
// an interrupt.
func followErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// jobLog turns a job's events into log lines.
type jobLog struct {
	lastSeq  int64
	finished bool                 // the job succeeded, is dead or canceled
	streamed map[int]map[int]bool // attempt → numbers of its stderr lines streamed
}

func (lg *jobLog) add(lines []logLine, ev ledger.Event) ([]logLine, error) {
	lg.lastSeq = max(lg.lastSeq, ev.Seq)
	at := ev.RecordedAt.UTC().Format(time.RFC3339Nano)
	switch ev.Type {
	case events.JobStderrWritten:
		var d events.StderrWritten
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("event %d: %w", ev.Seq, err)
		}
		if lg.streamed[d.Attempt] == nil {
			lg.streamed[d.Attempt] = map[int]bool{}
		}
		for i, l := range d.Lines {
			lg.streamed[d.Attempt][d.Line+i] = true
			lines = append(lines, logLine{Attempt: d.Attempt, At: l.At, Stream: "stderr", Message: l.Text})
		}
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
		var d events.AttemptEnded
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("event %d: %w", ev.Seq, err)
		}
		for i, text := range pluginhost.SplitStderr([]byte(d.Stderr)) {
			if !lg.streamed[d.Attempt][i+1] {
				lines = append(lines, logLine{Attempt: d.Attempt, At: at, Stream: "stderr", Message: text})
			}
		}
		var resp struct {
			Logs []struct {
				Level   string `json:"level"`
				Message string `json:"message"`
			} `json:"logs"`
		}
		_ = json.Unmarshal(d.Response, &resp) // no response, or one without logs
		for _, entry := range resp.Logs {
			lines = append(lines, logLine{Attempt: d.Attempt, At: at, Stream: "plugin", Level: entry.Level, Message: entry.Message})
		}
	}
	switch ev.Type {
	case events.JobSucceeded, events.JobDead, events.JobCanceled:
		lg.finished = true
	}
	return lines, nil
}

// printLogLines prints lines as text, or as one JSON object per line.
func printLogLines(e *env, lines []logLine, asJSON bool) error {
	for _, l := range lines {
		if asJSON {
			b, err := json.Marshal(l)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(e.stdout, "%s\n", b); err != nil {
				return err
			}
			continue
		}
		at := l.At
		if t, err := time.Parse(time.RFC3339Nano, l.At); err == nil {
			at = t.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		tag := l.Stream
		if l.Level != "" {
			tag = l.Level
		}
		if _, err := fmt.Fprintf(e.stdout, "%s #%d %-6s %s\n", at, l.Attempt, tag, strings.TrimSuffix(l.Message, "\r")); err != nil {
			return err
		}
	}
	return nil
}

func queueCommand() *cli.Command {
	return &cli.Command{
		Name:  "queue",
		Usage: "show the queue: running and queued jobs, oldest first (the order they run in)",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "limit", Value: 50, Usage: "show at most `N` jobs (0: all of them)"},
			jsonFlag(),
		},
		Action: withReadLedger(queueShow),
	}
}

func queueShow(c *cli.Context, e *env, l *ledger.Ledger) error {
	limit := c.Int("limit")
	if limit < 0 {
		return usagef("--limit must be 0 (all) or more, not %d", limit)
	}
	var q projections.Queue
	err := l.ReadSnapshot(c.Context, func(conn *sqlite.Conn) (err error) {
		q, err = projections.ReadQueue(conn, limit)
		return err
	})
	if err != nil {
		return err
	}
	out := struct {
		Counts projections.QueueCounts `json:"counts"`
		Jobs   []jobRow                `json:"active"`
		More   int64                   `json:"more"`
	}{Counts: q.Counts, Jobs: make([]jobRow, 0, len(q.Jobs)), More: q.More}
	for _, r := range q.Jobs {
		out.Jobs = append(out.Jobs, toJobRow(r))
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	running := fmt.Sprintf("running %d", q.Counts.Running+q.Counts.CancelRequested)
	if q.Counts.CancelRequested > 0 {
		running += fmt.Sprintf(" (%d cancel requested)", q.Counts.CancelRequested)
	}
	fmt.Fprintf(e.stdout, "queued %d, %s\n", q.Counts.Queued, running)
	if len(out.Jobs) > 0 {
		printJobTable(e, out.Jobs)
	}
	if q.More > 0 {
		fmt.Fprintf(e.stdout, "… and %d more (see: ductile queue --limit 0)\n", q.More)
	}
	return nil
}

func toEventLine(ev ledger.Event) eventLine {
	return eventLine{ev.Seq, ev.Stream, ev.Version, ev.Type, ev.Data, ev.Meta, ev.RecordedAt.UTC().Format(ledger.TimeFormat), fmt.Sprintf("%x", ev.Hash)}
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
	id, err := resolveJobID(c.Context, l, c.Args().First())
	if err != nil {
		return err
	}
	evs, err := l.ReadStream(c.Context, events.JobStream(id))
	if err != nil {
		return err
	}
	j, err := commands.FoldJob(evs)
	if errors.Is(err, commands.ErrJobNotFound) {
		return hintf(codeNotFound, "see: ductile job list", "no job %s", id)
	}
	if err != nil {
		return err
	}
	out := map[string]any{"job_id": id, "status_before": j.Status, "dry_run": c.Bool("dry-run")}
	status := j.Status
	if !c.Bool("dry-run") {
		status, err = commands.CancelJob(c.Context, l, commands.Cancel{JobID: id, Reason: c.String("reason"), Actor: commands.ByCLI, Now: time.Now()})
		if errors.Is(err, commands.ErrInvalidTransition) {
			return conflictf("job %s is %s: only a queued or running job can be canceled", id, j.Status)
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
	id, err := resolveJobID(ctx, l, c.Args().First())
	if err != nil {
		return err
	}
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return err
	}
	j, err := commands.FoldJob(evs)
	if err != nil {
		return err
	}
	if err := commands.CanRetry(j); err != nil {
		return retryRefused(ctx, l, j, err)
	}
	// The plugin and command must still be there, as for any enqueue.
	set, err := currentPlugins(ctx, e, l)
	if err != nil {
		return err
	}
	p, err := set.plugin(j.Plugin)
	if err != nil {
		return err
	}
	if _, err := set.command(p, j.Command, false); err != nil {
		return err
	}
	out := retryOutput{RetryOf: id, Plugin: j.Plugin, Command: j.Command, RanBy: "daemon"}
	if set.daemonPID == 0 {
		out.RanBy = "none"
	}
	if c.Bool("dry-run") {
		out.Status, out.DryRun = "would enqueue", true
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "would retry job %s (%s, %s %s) as a new job; %s (run without --dry-run to do it)\n",
			id, j.Status, j.Plugin, j.Command, whoRuns(set))
		return nil
	}
	defaults := commands.JobFor(e.cfg, j.Plugin, j.Command, commands.ByCLI)
	res, err := commands.RetryJob(ctx, l, commands.Retry{JobID: id, Actor: commands.ByCLI, MaxAttempts: defaults.MaxAttempts,
		BackoffBase: defaults.BackoffBase, DefaultDedupeTTL: defaults.DefaultDedupeTTL, Now: time.Now()})
	if errors.Is(err, commands.ErrInvalidTransition) || errors.Is(err, commands.ErrAlreadyRetried) {
		// Changed since it was read: say what it is now.
		if evs, rerr := l.ReadStream(ctx, events.JobStream(id)); rerr == nil {
			if now, ferr := commands.FoldJob(evs); ferr == nil {
				return retryRefused(ctx, l, now, err)
			}
		}
	}
	if err != nil {
		return err
	}
	out.JobID, out.ExistingJobID, out.Status = res.JobID, res.ExistingJobID, string(events.StatusQueued)
	if res.Deduped {
		out.Status = "deduped"
	}
	if h, err := daemon.Holder(e.stateDir); err == nil && !h.Held {
		// Nobody else will bring the projections up to date: do it, so job
		// list and queue show the new job at once.
		if _, err := projections.New(l, projections.Options{Logger: e.quietLogger()}).CatchUp(ctx); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if res.Deduped {
		fmt.Fprintf(e.stdout, "not retried: job %s with dedupe key %q already covers it\n", res.ExistingJobID, j.DedupeKey)
		return nil
	}
	fmt.Fprintf(e.stdout, "retried job %s as job %s (%s %s); %s\n", id, res.JobID, j.Plugin, j.Command, whoRuns(set))
	fmt.Fprintf(e.stdout, "follow it with: ductile job inspect %s\n", res.JobID)
	return nil
}

// whoRuns says who will run a job enqueued now.
func whoRuns(set pluginSet) string {
	if set.daemonPID != 0 {
		return fmt.Sprintf("the daemon (pid %d) will run it", set.daemonPID)
	}
	return "no daemon is running: it waits for one (ductile system start)"
}

// retryRefused explains why job j cannot be retried, and what to do instead.
func retryRefused(ctx context.Context, l *ledger.Ledger, j *commands.Job, err error) error {
	var retried *commands.RetriedError
	if errors.As(err, &retried) {
		status := events.Status("unknown")
		if evs, err := l.ReadStream(ctx, events.JobStream(retried.RetryJobID)); err == nil {
			if r, err := commands.FoldJob(evs); err == nil {
				status = r.Status
			}
		}
		return hintf(codeConflict, "retry that one if need be: ductile job retry "+retried.RetryJobID,
			"job %s was retried already, as job %s (now %s)", j.JobID, retried.RetryJobID, status)
	}
	switch j.Status {
	case events.StatusQueued:
		return hintf(codeConflict, "see: ductile job inspect "+j.JobID, "job %s is queued: it has not given up yet, so there is nothing to retry", j.JobID)
	case events.StatusRunning, events.StatusCancelRequested:
		return hintf(codeConflict, "wait for it, or stop it first: ductile job cancel "+j.JobID, "job %s is %s: only a dead or canceled job can be retried", j.JobID, j.Status)
	case events.StatusSucceeded:
		return hintf(codeConflict, fmt.Sprintf("to run it again, enqueue a new job: ductile plugin run %s --command %s", j.Plugin, j.Command),
			"job %s succeeded: only a dead or canceled job can be retried", j.JobID)
	}
	return failf("job %s cannot be retried: %v", j.JobID, err)
}
