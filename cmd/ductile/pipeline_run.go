package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/views"
)

// pipelineRunCommand is `pipeline run NAME`: the CLI twin of
// POST /pipeline/{name}.
func pipelineRunCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "start a run of a pipeline; --wait waits for it to finish",
		ArgsUsage: "NAME",
		Description: "Starts a run of the pipeline NAME of the config (--config) through the same command the API uses,\n" +
			"with --payload as the payload of its first step's event (a JSON object; default {}). Its steps' jobs\n" +
			"are built with the running daemon's applied settings and checked against the plugins it loaded\n" +
			"(with no daemon, against the plugins found now: the run then waits in the queue for one).\n" +
			"--wait (needs a running daemon) waits until the run has finished and prints its results;\n" +
			"exit status 1 if it failed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "payload", Usage: "`JSON` object, the payload of the first step's event; @FILE reads it from FILE, - from stdin"},
			&cli.BoolFlag{Name: "wait", Usage: "wait until the run has finished, and print its results"},
			&cli.DurationFlag{Name: "timeout", Usage: "with --wait, give up waiting after `DURATION` (the run goes on)"},
			jsonFlag(), dryRunFlag(),
		},
		Action: pipelineRun,
	}
}

// runWouldStart is the status pipeline run --dry-run prints: a run it
// did not start.
const runWouldStart events.RunStatus = "would start"

// pipelineRunOutput is what pipeline run prints with --json.
type pipelineRunOutput struct {
	Pipeline  string             `json:"pipeline"`
	RunID     string             `json:"run_id,omitempty"`
	JobID     string             `json:"job_id,omitempty"` // the run's first job
	Status    events.RunStatus   `json:"status"`           // running | succeeded | failed | would start (runWouldStart)
	Error     string             `json:"error,omitempty"`
	Results   []events.RunResult `json:"results,omitempty"`
	DaemonPID int                `json:"daemon_pid,omitempty"` // 0: no daemon runs it yet
	DryRun    bool               `json:"dry_run,omitempty"`
	// Applied, when a daemon runs, says whether it runs the config file's
	// version of the pipeline (the run uses that version either way).
	Applied *bool `json:"applied,omitempty"`
}

func pipelineRun(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("pipeline run takes one NAME, got %d argument(s) (see: ductile pipeline run --help)", c.NArg())
	}
	if c.IsSet("timeout") && !c.Bool("wait") {
		return usagef("--timeout needs --wait: it bounds how long to wait for the run (see: ductile pipeline run --help)")
	}
	if c.Duration("timeout") < 0 {
		return usagef("--timeout must not be negative, got %s: give how long to wait (leave it out to wait until the run finishes)", c.Duration("timeout"))
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	name := c.Args().First()
	payload, err := readObjectPayload(c)
	if err != nil {
		return err
	}
	ctx := c.Context

	// The plugins and settings the run's jobs are checked against and built
	// with: the running daemon's, else this process's.
	eng, err := currentEngine(ctx, e, nil)
	if err != nil {
		return err
	}
	p, err := configPipeline(e, eng, name)
	if err != nil {
		return err
	}
	out := pipelineRunOutput{Pipeline: name, DaemonPID: eng.daemonPID,
		Applied: pipelineApplied(eng.Applied(), eng.daemonPID != 0, name, p.Hash)}
	if out.Applied != nil && !*out.Applied && !c.Bool("json") {
		fmt.Fprintf(e.stdout, "%s; this run uses the config file's version %s\n", notAppliedNote(eng.Applied(), name), shortHash(p.Hash))
	}
	if c.Bool("wait") && eng.daemonPID == 0 {
		return hintf(errcode.Conflict, "start one with: ductile system start (or run without --wait: the run waits in the queue)",
			"--wait needs a running daemon: no daemon runs on %s to run the pipeline's steps", e.stateDir)
	}
	if c.Bool("dry-run") {
		out.Status, out.DryRun = runWouldStart, true
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "would start a run of pipeline %s (%s, first step %s) with payload %s (run without --dry-run to do it)\n",
			name, p.ExecutionMode, p.Entry, quote(string(payload)))
		return nil
	}

	l, err := e.openLedger(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	started, err := eng.OnLedger(l).StartPipeline(ctx, engine.StartPipeline{Pipeline: p, Payload: payload,
		Trigger: events.TriggerCLI, By: events.ActorCLI})
	if err != nil {
		return err
	}
	out.RunID, out.JobID, out.Status = started.RunID, started.JobID, events.RunRunning
	if !c.Bool("wait") {
		if c.Bool("json") {
			return printJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "started run %s of pipeline %s (first job %s)\n", started.RunID, name, started.JobID)
		if eng.daemonPID == 0 {
			fmt.Fprintf(e.stdout, "no daemon runs on %s: the run waits in the queue until one starts (ductile system start)\n", e.stateDir)
		}
		fmt.Fprintf(e.stdout, "follow it with: ductile job tree %s\n", started.JobID)
		return nil
	}
	return waitPipelineRun(c, e, l, out)
}

// waitPipelineRun waits for the run out names and prints how it finished.
func waitPipelineRun(c *cli.Context, e *env, l *ledger.Ledger, out pipelineRunOutput) error {
	waitCtx := c.Context
	if timeout := c.Duration("timeout"); timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(waitCtx, timeout)
		defer cancel()
	}
	finished, err := views.WaitRun(waitCtx, l, out.RunID)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return errorf(classify(err), "stopped waiting for run %s of pipeline %s; it goes on (see: ductile job tree %s)", out.RunID, out.Pipeline, out.JobID)
		}
		return err
	}
	out.Status, out.Error, out.Results = finished.Status, finished.Error, finished.Results
	if c.Bool("json") {
		if err := printJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		printPipelineRun(e, out)
	}
	if out.Status != events.RunSucceeded {
		return silent(exitFailure)
	}
	return nil
}

// printPipelineRun prints a finished run: its status, then each job that
// ended a path of it.
func printPipelineRun(e *env, out pipelineRunOutput) {
	fmt.Fprintf(e.stdout, "run %s of pipeline %s %s", out.RunID, out.Pipeline, out.Status)
	if out.Error != "" {
		fmt.Fprintf(e.stdout, ": %s", out.Error)
	}
	fmt.Fprintf(e.stdout, " (%d result(s))\n", len(out.Results))
	for _, r := range out.Results {
		fmt.Fprintf(e.stdout, "  %s: %s %s, job %s %s", r.Node, r.Plugin, r.Command, r.JobID, r.Status)
		switch {
		case r.Error != "":
			fmt.Fprintf(e.stdout, ": %s", r.Error)
		case len(r.Result) > 0:
			fmt.Fprintf(e.stdout, ": %s", resultText(r.Result))
		}
		fmt.Fprintln(e.stdout)
	}
	fmt.Fprintf(e.stdout, "details: ductile job tree %s\n", out.JobID)
}

// resultText is a step's result as one line: a string as its text (as
// plugin run --wait prints it), anything else as its JSON; cut past 80 bytes.
func resultText(result json.RawMessage) string {
	text := string(result)
	var s string
	if json.Unmarshal(result, &s) == nil {
		text = s
	}
	if q := quote(text); q != strconv.Quote(text) || strings.ContainsAny(text, "\n\r") {
		return q // long, or several lines: quoted and cut
	}
	return text
}

// readObjectPayload is --payload ({} when not given): a pipeline's first
// step reads its input as payload.<key>.
func readObjectPayload(c *cli.Context) (json.RawMessage, error) {
	payload, err := readPayload(c)
	if payload == nil && err == nil {
		return json.RawMessage(`{}`), nil
	}
	return payload, err
}

// configPipeline compiles the config's pipelines, checking each step's
// plugin command against eng (engine.Target), and returns the one named name.
func configPipeline(e *env, eng cliEngine, name string) (*pipeline.Pipeline, error) {
	compiled, err := pipeline.Compile(e.cfg, func(plugin, command string) error {
		_, _, err := eng.Target(plugin, command)
		return err
	})
	if err != nil {
		hint := "fix the config's pipelines: section"
		if eng.daemonPID != 0 {
			hint += fmt.Sprintf("; steps are checked against the %s (see: ductile plugin list)", eng.which())
		}
		return nil, withHint(errcode.InvalidConfig, err, hint)
	}
	if p, ok := compiled.Pipelines[name]; ok {
		return p, nil
	}
	var names []string
	for n := range compiled.Pipelines {
		names = append(names, n)
	}
	slices.Sort(names)
	source := "the built-in defaults (give --config FILE)"
	if e.cfg.Source != "" {
		source = e.cfg.Source
	}
	return nil, hintf(errcode.NotFound, "its pipelines: "+orNothing(names)+"; see: ductile pipeline list",
		"no pipeline %q in %s%s", name, source, didYouMean(name, names))
}
