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

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

func pluginCommand() *cli.Command {
	return &cli.Command{
		Name:  "plugin",
		Usage: "list and run plugins",
		Subcommands: []*cli.Command{
			{
				Name:   "list",
				Usage:  "list discovered plugins, and those skipped with the reason",
				Flags:  []cli.Flag{jsonFlag},
				Action: pluginList,
			},
			{
				Name:      "run",
				Usage:     "enqueue a job for a plugin; without a running daemon, run it here and now",
				ArgsUsage: "PLUGIN",
				Description: "Enqueues a job through the same command every producer uses. When a daemon runs\n" +
					"on the state directory it runs the job; --wait blocks until the job is finished.\n" +
					"When no daemon runs, this command takes the daemon's place until the job is\n" +
					"finished (retries included), on the same ledger. Exit status 1 if the job ends dead.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "command", Value: "poll", Usage: "plugin `COMMAND` to run"},
					&cli.StringFlag{Name: "payload", Usage: "`JSON` payload, handed to the plugin as event.payload"},
					&cli.StringFlag{Name: "dedupe-key", Usage: "drop this job if one with the same `KEY` succeeded recently (spec §3.6)"},
					&cli.DurationFlag{Name: "dedupe-ttl", Usage: "dedupe window for this job; also drops it while one with the key is queued or running"},
					&cli.BoolFlag{Name: "wait", Usage: "with a daemon running, wait until the job is finished"},
					&cli.DurationFlag{Name: "timeout", Usage: "give up waiting after `DURATION` (the job goes on)"},
					jsonFlag, dryRunFlag,
				},
				Action: pluginRun,
			},
		},
	}
}

func pluginList(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	reg, problems, err := daemon.DiscoverPlugins(e.stateDir, e.cfg, e.quietLogger())
	if err != nil {
		return err
	}
	type cmdOut struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	type pluginOut struct {
		Name            string   `json:"name"`
		Version         string   `json:"version"`
		Description     string   `json:"description,omitempty"`
		Dir             string   `json:"dir"`
		Commands        []cmdOut `json:"commands"`
		ConcurrencySafe bool     `json:"concurrency_safe"`
		Parallelism     int      `json:"parallelism"`
		Enabled         bool     `json:"enabled"`
	}
	out := struct {
		Plugins []pluginOut `json:"plugins"`
		Skipped []string    `json:"skipped"`
	}{Plugins: []pluginOut{}, Skipped: []string{}}
	for _, p := range reg.List() {
		po := pluginOut{Name: p.Name, Version: p.Manifest.Version, Description: p.Manifest.Description, Dir: p.Dir,
			ConcurrencySafe: p.Manifest.ConcurrencySafe, Parallelism: e.cfg.Plugin(p.Name).Parallelism, Enabled: e.cfg.Plugin(p.Name).Enabled}
		for _, cmd := range p.Manifest.Commands {
			po.Commands = append(po.Commands, cmdOut{Name: cmd.Name, Type: string(cmd.Type)})
		}
		out.Plugins = append(out.Plugins, po)
	}
	for _, p := range problems {
		out.Skipped = append(out.Skipped, p.Error())
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tCOMMANDS\tDIR")
	for _, p := range out.Plugins {
		var names []string
		for _, c := range p.Commands {
			names = append(names, c.Name+"("+c.Type+")")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Version, strings.Join(names, " "), p.Dir)
	}
	tw.Flush()
	for _, s := range out.Skipped {
		fmt.Fprintf(e.stdout, "skipped: %s\n", s)
	}
	return nil
}

// runOutput is what plugin run prints with --json.
type runOutput struct {
	JobID         string          `json:"job_id"`
	Plugin        string          `json:"plugin"`
	Command       string          `json:"command"`
	Status        string          `json:"status"`
	Deduped       bool            `json:"deduped,omitempty"`
	ExistingJobID string          `json:"existing_job_id,omitempty"`
	Attempt       int             `json:"attempt,omitempty"`
	Error         string          `json:"error,omitempty"`
	Response      json.RawMessage `json:"response,omitempty"`
	RanBy         string          `json:"ran_by"` // daemon | cli
	DryRun        bool            `json:"dry_run,omitempty"`
}

func pluginRun(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	name := c.Args().First()
	if !e.cfg.Plugin(name).Enabled {
		return failf("plugin %q is disabled in the config (plugins.%s.enabled: false)", name, name)
	}
	enq := dispatch.JobFor(e.cfg, name, c.String("command"), commands.ByCLI)
	if p := c.String("payload"); p != "" {
		if !json.Valid([]byte(p)) {
			return usagef("--payload is not valid JSON: %s", p)
		}
		enq.Payload = json.RawMessage(p)
	}
	enq.DedupeKey, enq.DedupeTTL = c.String("dedupe-key"), c.Duration("dedupe-ttl")
	if enq.DedupeTTL > 0 && enq.DedupeKey == "" {
		return usagef("--dedupe-ttl needs --dedupe-key")
	}
	ctx := c.Context
	if t := c.Duration("timeout"); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	out := runOutput{Plugin: name, Command: enq.Command, RanBy: "daemon"}
	if c.Bool("dry-run") {
		h, err := daemon.Holder(e.stateDir)
		if err != nil {
			return err
		}
		out.Status, out.DryRun = "would enqueue", true
		if !h.Daemon() {
			out.RanBy = "cli"
		}
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "would enqueue %s %s (payload %s); it would run in the %s (run without --dry-run to do it)\n", name, enq.Command, orNone(enq.Payload), out.RanBy)
		return nil
	}

	// d is this process's own runner, when no daemon is there to run the job.
	d, holder, err := openRunner(ctx, e)
	if err != nil {
		return err
	}
	daemonRuns := d == nil
	var l *ledger.Ledger
	if daemonRuns {
		if l, err = e.openLedger(ctx); err != nil {
			return err
		}
		defer l.Close()
	} else {
		defer d.Close()
		l, out.RanBy = d.Ledger, "cli"
		if _, ok := d.Plugins.Get(name); !ok {
			return failf("no plugin named %q (see: ductile plugin list)", name)
		}
	}
	enq.Now = time.Now()
	res, err := commands.EnqueueJob(ctx, l, enq)
	if err != nil {
		return err
	}
	out.JobID, out.Deduped, out.ExistingJobID = res.JobID, res.Deduped, res.ExistingJobID
	if res.Deduped {
		e.quietLogger().Info("job dropped as a duplicate", "component", "cli", "plugin", name, "dedupe_key", enq.DedupeKey, "existing_job_id", res.ExistingJobID)
		out.Status = "deduped"
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "not enqueued: job %s with dedupe key %q already covers it\n", res.ExistingJobID, enq.DedupeKey)
		return nil
	}
	if daemonRuns && !c.Bool("wait") {
		out.Status = events.StatusQueued
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "enqueued job %s (%s %s); the daemon (pid %d) will run it\n", res.JobID, name, enq.Command, holder.PID)
		fmt.Fprintf(e.stdout, "follow it with: ductile job inspect %s\n", res.JobID)
		return nil
	}
	waitCtx := ctx
	if !daemonRuns {
		// Run this one job here, retries included. Jobs it routes stay
		// queued for the daemon.
		if err := d.Dispatcher.RunJob(ctx, res.JobID); err != nil && ctx.Err() == nil {
			return err
		}
		waitCtx = context.WithoutCancel(ctx) // the job is finished (or canceled by the interrupt)
	}
	j, last, err := waitJob(waitCtx, l, res.JobID)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return failf("stopped waiting for job %s; it goes on (see: ductile job inspect %s)", res.JobID, res.JobID)
		}
		return err
	}
	out.Status, out.Attempt, out.Error, out.Response = j.Status, j.Attempt, j.LastError, last.Response
	if c.Bool("json") {
		if err := printJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printRunResult(e, out, last)
	}
	if j.Status != events.StatusSucceeded {
		return silent(exitFailure)
	}
	return nil
}

func printRunResult(e *env, out runOutput, last events.AttemptEnded) {
	switch out.Status {
	case events.StatusSucceeded:
		var resp struct {
			Result string `json:"result"`
		}
		_ = json.Unmarshal(out.Response, &resp)
		fmt.Fprintf(e.stdout, "job %s succeeded (attempt %d, %d ms): %s\n", out.JobID, out.Attempt, last.DurationMS, resp.Result)
	default:
		fmt.Fprintf(e.stdout, "job %s is %s after attempt %d: %s\n", out.JobID, out.Status, out.Attempt, out.Error)
		if last.Stderr != "" {
			fmt.Fprintf(e.stdout, "stderr:\n%s\n", strings.TrimRight(last.Stderr, "\n"))
		}
		fmt.Fprintf(e.stdout, "details: ductile job inspect %s\n", out.JobID)
	}
}

// openRunner returns the parts of a daemon, opened here without its
// dispatch loop, when no daemon holds the state directory; or nil and the
// daemon that holds it. Another plugin run holding the lock runs only its own
// job, so this one waits for it to finish and then takes its place. (That
// wait polls the lock every 20 ms: flock cannot wait under a context.)
func openRunner(ctx context.Context, e *env) (*daemon.Daemon, daemon.LockHolder, error) {
	for {
		h, err := daemon.Holder(e.stateDir)
		switch {
		case err != nil:
			return nil, h, err
		case h.Daemon():
			return nil, h, nil
		case !h.Held:
			d, err := daemon.Open(ctx, daemon.Options{StateDir: e.stateDir, Config: e.cfg, Logger: e.quietLogger(), NoDispatch: true})
			var le *daemon.LockError
			if !errors.As(err, &le) {
				return d, h, err
			}
			continue // taken meanwhile: look at who took it
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, h, ctx.Err()
		case <-t.C:
		}
	}
}

// waitJob waits until the job is terminal, reading its stream (the source
// of truth) each time the ledger changes, in this or another process.
func waitJob(ctx context.Context, l *ledger.Ledger, id string) (*commands.Job, events.AttemptEnded, error) {
	for {
		changed := l.Changed()
		evs, err := l.ReadStream(ctx, events.JobStream(id))
		if err != nil {
			return nil, events.AttemptEnded{}, err
		}
		j, err := commands.FoldJob(evs)
		if err != nil {
			return nil, events.AttemptEnded{}, err
		}
		if j.Terminal() {
			return j, lastAttempt(evs), nil
		}
		select {
		case <-ctx.Done():
			return nil, events.AttemptEnded{}, ctx.Err()
		case <-changed:
		}
	}
}

func lastAttempt(evs []ledger.Event) events.AttemptEnded {
	var last events.AttemptEnded
	for _, ev := range evs {
		switch ev.Type {
		case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
			_ = json.Unmarshal(ev.Data, &last)
		}
	}
	return last
}

func orNone(b []byte) string {
	if len(b) == 0 {
		return "none"
	}
	return string(b)
}
