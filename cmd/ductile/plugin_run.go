package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

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
	Tree          *views.JobTree  `json:"tree,omitempty"` // with --wait-tree: the job and the jobs routed from it
	RanBy         string          `json:"ran_by"`         // daemon | cli
	DryRun        bool            `json:"dry_run,omitempty"`
}

// waitTreeName is plugin run's flag that waits for the whole job tree.
const waitTreeName = "wait-tree"

// maxTreeJobs bounds the tree --wait-tree waits for and prints.
const maxTreeJobs = 10_000

func pluginRun(c *cli.Context) error {
	waitTree := c.Bool(waitTreeName)
	wait := c.Bool("wait") || waitTree
	if c.IsSet("timeout") && !wait {
		return usagef("--timeout needs --wait or --wait-tree: it bounds how long to wait for the job (see: ductile plugin run --help)")
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	name := c.Args().First()
	// Everything the command line alone can refuse, before anything is opened.
	payload, err := readPayload(c)
	if err != nil {
		return err
	}
	dedupeKey, dedupeTTL := c.String("dedupe-key"), c.Duration("dedupe-ttl")
	if dedupeTTL > 0 && dedupeKey == "" {
		return usagef("--dedupe-ttl needs --dedupe-key")
	}
	ctx := c.Context
	// enqueue is the intent, on the Engine that will run the job.
	enqueue := func(eng cliEngine, dryRun bool) (engine.Enqueued, error) {
		res, err := eng.Enqueue(ctx, engine.Enqueue{Plugin: name, Command: c.String("command"), Payload: payload,
			DedupeKey: dedupeKey, DedupeTTL: dedupeTTL, By: events.ActorCLI, DryRun: dryRun,
			Allow: func(events.AppliedCommand) error { return eng.resolved(name) }})
		return res, eng.refused(err, c.String("command") == "")
	}
	out := runOutput{Plugin: name, RanBy: "daemon"}
	if c.Bool("dry-run") {
		eng, err := currentEngine(ctx, e, nil)
		if err != nil {
			return err
		}
		enq, err := enqueue(eng, true)
		if err != nil {
			return err
		}
		out.Command, out.Status, out.DryRun = enq.Command, "would enqueue", true
		if eng.daemonPID == 0 {
			out.RanBy = "cli"
		}
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		shown := "none"
		if len(enq.Job.Payload) > 0 {
			shown = quote(string(enq.Job.Payload))
		}
		fmt.Fprintf(e.stdout, "would enqueue %s %s (payload %s); it would run in the %s (run without --dry-run to do it)\n",
			name, enq.Command, shown, out.RanBy)
		return nil
	}

	w, err := openEnqueuer(ctx, e)
	if err != nil {
		return err
	}
	defer w.close()
	d, l, eng := w.core, w.ledger, w.engine
	daemonRuns := d == nil
	if !daemonRuns {
		if waitTree {
			return hintf(errcode.Conflict, "start one with: ductile system start (or use --wait for this job alone)",
				"--wait-tree needs a running daemon: without one, plugin run runs its own job only, and the jobs it routes wait for a daemon")
		}
		out.RanBy = "cli"
	}
	res, err := enqueue(eng, false)
	if err != nil {
		return err
	}
	out.Command = res.Command
	out.JobID, out.Deduped, out.ExistingJobID = res.JobID, res.Deduped, res.ExistingJobID
	if res.Deduped {
		e.quietLogger().Info("job dropped as a duplicate", "component", "cli", "plugin", name, "dedupe_key", dedupeKey, "existing_job_id", res.ExistingJobID)
		out.Status = "deduped"
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "not enqueued: job %s with dedupe key %q already covers it\n", res.ExistingJobID, dedupeKey)
		return nil
	}
	if daemonRuns && !wait {
		out.Status = string(events.StatusQueued)
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "enqueued job %s (%s %s); the daemon (pid %d) will run it\n", res.JobID, name, res.Command, eng.daemonPID)
		fmt.Fprintf(e.stdout, "follow it with: ductile job inspect %s\n", res.JobID)
		return nil
	}
	// --timeout bounds the wait (or, without a daemon, the run) from here:
	// opening the ledger and enqueueing are not cut short by it.
	waitCtx := ctx
	timeout := c.Duration("timeout")
	if timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeoutCause(ctx, timeout, &timeoutError{timeout})
		defer cancel()
	}
	var runCause error // why this command's own run of the job was cut short
	if !daemonRuns {
		// Run this one job here, retries included; at the timeout or an
		// interrupt it is canceled, since no daemon is there to take it
		// over. Jobs it routes stay queued for the daemon.
		if err := d.RunJob(waitCtx, res.JobID); err != nil && waitCtx.Err() == nil {
			return err
		}
		runCause = context.Cause(waitCtx)
		waitCtx = context.WithoutCancel(waitCtx) // the job is finished (or canceled)
	}
	j, last, err := views.WaitJob(waitCtx, l, res.JobID)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return errorf(classify(err), "stopped waiting for job %s; it goes on (see: ductile job inspect %s)", res.JobID, res.JobID)
		}
		return err
	}
	var timedOut *timeoutError
	if errors.As(runCause, &timedOut) && j.Status == events.StatusCanceled {
		return errorf(errcode.Timeout, "job %s was canceled: %v, and with no daemon running on the state directory this command "+
			"was running it (start one with ductile system start for jobs that outlive the command)", res.JobID, timedOut)
	}
	out.Status, out.Attempt, out.Error, out.Response = string(j.Status), j.Attempt, j.LastError, last.Response
	succeeded := j.Status == events.StatusSucceeded
	if waitTree {
		tree, err := views.WaitTree(waitCtx, l, res.JobID, maxTreeJobs)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return errorf(classify(err), "job %s is %s; stopped waiting for the jobs routed from it, which go on (see: ductile job tree %s)", res.JobID, j.Status, res.JobID)
			}
			return err
		}
		out.Tree = &tree
		for _, tj := range tree.Jobs {
			succeeded = succeeded && tj.Status == events.StatusSucceeded
		}
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printRunResult(e, out, last)
		if out.Tree != nil {
			printJobTree(e, jobTreeOutput{JobID: out.JobID, JobTreeAt: views.TreeNow(*out.Tree)})
		}
	}
	if !succeeded {
		return silent(exitFailure)
	}
	return nil
}

// timeoutError is the cause of a plugin run's --timeout: the reason a job
// this command ran itself is canceled with.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("--timeout %s reached", e.after) }

func printRunResult(e *env, out runOutput, last events.AttemptEnded) {
	switch events.Status(out.Status) {
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

// openRunner returns a Core opened here, to run this command's job on, when
// no daemon holds the state directory; or nil and the daemon that holds
// it. Another plugin run holding the lock runs only its own
// job, so this one waits for it to finish and then takes its place. (That
// wait polls the lock every 20 ms: flock cannot wait under a context.)
// enqueuer is where a CLI enqueue goes: the daemon's ledger when a daemon
// runs (it runs the job), else this process's own Core, which runs it.
type enqueuer struct {
	core   *daemon.Core // nil when a daemon runs the job
	ledger *ledger.Ledger
	engine cliEngine
	close  func()
}

// openEnqueuer opens where an enqueue of this process goes (enqueuer).
func openEnqueuer(ctx context.Context, e *env) (*enqueuer, error) {
	d, holder, err := openRunner(ctx, e)
	if err != nil {
		return nil, err
	}
	if d != nil {
		return &enqueuer{core: d, ledger: d.Ledger, engine: cliEngine{Engine: d.Engine()}, close: func() { d.Close() }}, nil
	}
	l, err := e.openLedger(ctx)
	if err != nil {
		return nil, err
	}
	eng, err := daemonEngine(ctx, e, l, holder.PID)
	if err != nil {
		l.Close()
		return nil, err
	}
	return &enqueuer{ledger: l, engine: eng, close: func() { l.Close() }}, nil
}

func openRunner(ctx context.Context, e *env) (*daemon.Core, daemon.LockHolder, error) {
	for {
		h, err := daemon.Holder(e.stateDir)
		switch {
		case err != nil:
			return nil, h, err
		case h.Daemon():
			return nil, h, nil
		case !h.Held:
			d, err := daemon.OpenCore(ctx, daemon.CoreOptions{StateDir: e.stateDir, Config: e.cfg, Logger: e.quietLogger()})
			var le *daemon.LockError
			if !errors.As(err, &le) {
				return d, h, ledgerError(err)
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
