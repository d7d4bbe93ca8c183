package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// Run creation modes (POST /runs's mode).
const (
	modeAsync = "async"
	modeSync  = "sync"
)

// runCreateFlags are run create's flags (and run's, for ductile run
// PLUGIN [COMMAND]).
func runCreateFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "args", Aliases: []string{"payload"}, Usage: "the run's args: a `JSON` object, handed to the plugin as event.payload; @FILE reads it from FILE, - from stdin"},
		&cli.StringFlag{Name: "task-id", Usage: "the caller's business id `TASK` (run list --task-id finds its runs)"},
		&cli.StringFlag{Name: "trace-id", Usage: "a cross-service trace id `TRACE`, handed to the plugin and recorded on its export items"},
		&cli.StringFlag{Name: "idempotency-key", Usage: "within the dedupe window, the same `KEY` answers the run it made instead of creating one"},
		&cli.StringFlag{Name: "mode", Value: modeAsync, Usage: "`MODE` async (answer once the run is queued) or sync (wait until it ends); without a daemon it is always run here"},
		&cli.DurationFlag{Name: "timeout", Usage: "with --mode sync, give up waiting after `DURATION`: the daemon's run goes on; with no daemon, this command, which runs it, cancels it"},
		jsonFlag(), dryRunFlag(),
	}
}

// runCreateOutput is what run create prints with --json: POST /runs's
// answer, with who runs it.
type runCreateOutput struct {
	RunID    string           `json:"run_id,omitempty"`
	PluginID string           `json:"plugin_id"`
	EntryID  string           `json:"entry_id"`
	Status   string           `json:"status"`
	Existing bool             `json:"existing"`
	Run      *views.RunRecord `json:"run,omitempty"` // the run as it is when the command ends
	RanBy    string           `json:"ran_by"`        // daemon | cli
	DryRun   bool             `json:"dry_run,omitempty"`
}

// runCreate creates a plugin run: run create PLUGIN [COMMAND], or run
// PLUGIN [COMMAND]. With a daemon on the state directory the daemon runs
// it; without one this command does, as plugin run does.
func runCreate(c *cli.Context) error {
	if c.NArg() == 0 {
		return usagef("run create needs a PLUGIN (and optionally its COMMAND): ductile run create PLUGIN [COMMAND] (see: ductile plugin list)")
	}
	if c.NArg() > 2 {
		return usagef("run create takes a PLUGIN and at most one COMMAND, got %q (give args with --args JSON)", c.Args().Slice())
	}
	mode := c.String("mode")
	if mode != modeAsync && mode != modeSync {
		return usagef("--mode %q: give async or sync", mode)
	}
	if c.IsSet("timeout") && mode != modeSync {
		return usagef("--timeout needs --mode sync: it bounds how long to wait for the run")
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	payload, err := readPayload(c)
	if err != nil {
		return err
	}
	ctx := c.Context
	plugin, command := c.Args().Get(0), c.Args().Get(1)
	key := c.String("idempotency-key")
	if len(key) > commands.MaxIdempotencyKey {
		return usagef("--idempotency-key is %d bytes: give at most %d", len(key), commands.MaxIdempotencyKey)
	}
	create := func(eng cliEngine, dryRun bool) (engine.Enqueued, error) {
		res, err := eng.Enqueue(ctx, engine.Enqueue{Plugin: plugin, Command: command, Payload: payload,
			TaskID: c.String("task-id"), TraceID: c.String("trace-id"), IdempotencyKey: key, By: events.ActorCLI, DryRun: dryRun,
			Allow: func(events.AppliedCommand) error { return eng.resolved(plugin) }})
		var conflict *engine.IdempotencyConflictError
		if errors.As(err, &conflict) {
			return res, withHint(errcode.IdempotencyConflict, conflict, "see that run: ductile run get "+conflict.JobID)
		}
		return res, eng.refused(err, command == "")
	}
	out := runCreateOutput{PluginID: plugin, RanBy: "daemon"}
	if c.Bool("dry-run") {
		eng, err := currentEngine(ctx, e, nil)
		if err != nil {
			return err
		}
		res, err := create(eng, true)
		if err != nil {
			return err
		}
		out.EntryID, out.Status, out.DryRun = res.Command, "would create", true
		if eng.daemonPID == 0 {
			out.RanBy = "cli"
		}
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "would create a run of %s %s; it would run in the %s (run without --dry-run to do it)\n", plugin, res.Command, out.RanBy)
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
		out.RanBy = "cli"
	}
	res, err := create(eng, false)
	if err != nil {
		return err
	}
	out.RunID, out.EntryID, out.Existing = res.JobID, res.Command, res.Existing
	waitCtx := ctx
	if t := c.Duration("timeout"); t > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeoutCause(ctx, t, &timeoutError{t})
		defer cancel()
	}
	waited := !daemonRuns || mode == modeSync
	var runCause error
	switch {
	case !daemonRuns && !res.Existing:
		// No daemon: this command runs the run, retries included; at the
		// timeout or an interrupt it is canceled.
		if err := d.RunJob(waitCtx, res.JobID); err != nil && waitCtx.Err() == nil {
			return err
		}
		runCause = context.Cause(waitCtx)
	case mode == modeSync:
		if _, _, err := views.WaitJob(waitCtx, l, res.JobID); err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return errorf(classify(err), "stopped waiting for run %s; it goes on (see: ductile run watch %s)", res.JobID, res.JobID)
			}
			return err
		}
	}
	rec, err := views.ReadRunRecord(context.WithoutCancel(ctx), l, res.JobID)
	if err != nil {
		return err
	}
	out.Status, out.Run = string(rec.Status), &rec
	var timedOut *timeoutError
	if errors.As(runCause, &timedOut) && rec.Status == views.RunCanceled {
		return errorf(errcode.Timeout, "run %s was canceled: %v, and with no daemon running on the state directory this command "+
			"was running it (start one with ductile system start for runs that outlive the command)", res.JobID, timedOut)
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printRunCreated(e, out, eng.daemonPID)
	}
	if waited && rec.Status.Terminal() && rec.Status != views.RunSucceeded {
		return silent(exitFailure)
	}
	return nil
}

// printRunCreated says what run create did.
func printRunCreated(e *env, out runCreateOutput, daemonPID int) {
	w, r := e.stdout, out.Run
	switch {
	case out.Existing:
		fmt.Fprintf(w, "run %s (%s %s) has idempotency key %s already: nothing created; it is %s\n", r.RunID, r.PluginID, r.EntryID, deref(r.IdempotencyKey), r.Status)
	case !r.Status.Terminal():
		fmt.Fprintf(w, "created run %s (%s %s): %s; the daemon (pid %d) runs it\n", r.RunID, r.PluginID, r.EntryID, r.Status, daemonPID)
		fmt.Fprintf(w, "follow it with: ductile run watch %s\n", r.RunID)
		return
	default:
		fmt.Fprintf(w, "run %s (%s %s) %s", r.RunID, r.PluginID, r.EntryID, r.Status)
		if r.Error != nil {
			fmt.Fprintf(w, ": %s: %s", r.Error.Code, oneLine(r.Error.Message, 200))
		}
		fmt.Fprintln(w)
	}
	if r.ExportsCount > 0 {
		fmt.Fprintf(w, "%d export items: ductile run export %s\n", r.ExportsCount, r.RunID)
	}
	fmt.Fprintf(w, "details: ductile run get %s\n", r.RunID)
}
