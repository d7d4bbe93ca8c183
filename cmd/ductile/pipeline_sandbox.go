package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/views"
)

// pipelineSandbox is pipeline dry-run NAME --step STEP: the step's real
// plugin runs once in a sandbox (daemon.RunSandboxStep), and its response,
// its events and what the pipeline would do next are printed.
func pipelineSandbox(c *cli.Context, e *env, p *pipeline.Pipeline, payload json.RawMessage) error {
	step := c.String("step")
	n := p.Nodes[step]
	if n == nil {
		ids := make([]string, 0, len(p.Nodes))
		for _, node := range p.Order() {
			if node.Kind == pipeline.KindUses {
				ids = append(ids, node.ID)
			}
		}
		return hintf(errcode.NotFound, "see: ductile pipeline show "+p.Name,
			"pipeline %s has no step %q%s (its steps that run a plugin: %s)", p.Name, step, didYouMean(step, ids), strings.Join(ids, ", "))
	}
	if n.Kind != pipeline.KindUses {
		return usagef("step %s of pipeline %s is a %s: it runs no plugin; give one of its branches' steps: %s", step, p.Name, n.Kind, strings.Join(n.Branches, ", "))
	}
	var ctxJSON json.RawMessage
	if text := c.String("context"); text != "" {
		var object map[string]json.RawMessage
		if json.Unmarshal([]byte(text), &object) != nil || object == nil {
			return usagef(`--context must be a JSON object, like {"web": {"url": "…"}}: the baggage the step inherits, read as context.<path>`)
		}
		ctxJSON = json.RawMessage(text)
	}
	live, err := liveLedger(c, e)
	if err != nil {
		return err
	}
	if live != nil {
		defer live.Close()
	}
	report, err := daemon.RunSandboxStep(c.Context, daemon.SandboxStep{Config: e.cfg, Pipeline: p.Name, Step: step,
		Event: c.String("event"), Payload: payload, Context: ctxJSON, State: live, Logger: e.quietLogger()})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, struct {
			views.StepRun
			Sandbox bool `json:"sandbox"`
		}{report, true}); err != nil {
			return err
		}
	} else {
		printStepRun(e.stdout, report)
	}
	if report.Ran && report.Status != events.StatusSucceeded {
		return silent(exitFailure)
	}
	return nil
}

// liveLedger is the state directory's ledger, read-only, for the plugin's
// state; nil when there is none yet.
func liveLedger(c *cli.Context, e *env) (*ledger.Ledger, error) {
	if _, err := os.Stat(daemon.DBPath(e.stateDir)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return e.readLedger(c.Context)
}

// printStepRun prints a sandbox's report: the step, what its plugin
// answered and emitted, and what would follow.
func printStepRun(w io.Writer, r views.StepRun) {
	fmt.Fprintf(w, "sandbox run of step %s of pipeline %s (nothing is recorded in the ledger)\n", r.Step, r.Pipeline)
	if r.Input != nil {
		fmt.Fprintf(w, "  input     %s %s: event %s %s\n", r.Input.Plugin, r.Input.Command, r.Input.Event, compactJSON(payloadOr(r.Input.Payload)))
		if len(r.Input.Context) > 0 {
			fmt.Fprintf(w, "  context   %s\n", compactJSON(r.Input.Context))
		}
	}
	switch {
	case r.Input == nil:
		fmt.Fprintf(w, "  the step is bypassed: its plugin does not run\n")
	case !r.Ran:
		fmt.Fprintf(w, "  the step fails before its plugin runs: %s\n", r.Error)
	default:
		fmt.Fprintf(w, "  %s in %d ms", r.Status, r.DurationMS)
		if r.Error != "" {
			fmt.Fprintf(w, ": %s", r.Error)
		}
		fmt.Fprintln(w)
		if len(r.Response) > 0 {
			fmt.Fprintf(w, "  response  %s\n", oneLine(compactJSON(r.Response), 200))
		}
		for _, ev := range r.Events {
			fmt.Fprintf(w, "  emitted   %s %s\n", ev.Type, oneLine(compactJSON(payloadOr(ev.Payload)), 160))
		}
		if len(r.State) > 0 {
			fmt.Fprintf(w, "  state     %s (discarded)\n", oneLine(compactJSON(r.State), 160))
		}
		if r.Stderr != "" {
			fmt.Fprintf(w, "  stderr:\n%s\n", strings.TrimRight(r.Stderr, "\n"))
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  skipped   %s: %s\n", s.Node, s.Reason)
	}
	for _, s := range r.Dropped {
		fmt.Fprintf(w, "  dropped   %s: %s\n", s.Node, s.Reason)
	}
	for _, j := range r.Next {
		where := j.Plugin + " " + j.Command
		if j.Node != "" {
			where = "step " + j.Node + " (" + where + ")"
			if j.Pipeline != r.Pipeline {
				where = "pipeline " + j.Pipeline + " " + where
			}
		}
		fmt.Fprintf(w, "  next      %s on %s %s", where, j.Event, oneLine(compactJSON(payloadOr(j.Payload)), 120))
		if j.Error != "" {
			fmt.Fprintf(w, ": fails at once: %s", j.Error)
		}
		fmt.Fprintln(w)
	}
	switch {
	case len(r.Next) > 0:
	case r.Split != "":
		fmt.Fprintf(w, "then its branch of split %s would end (the run goes on past the split once every branch has ended)\n", r.Split)
	case r.RunStatus != events.RunRunning:
		fmt.Fprintf(w, "then the run would end: %s\n", r.RunStatus)
	}
}

// payloadOr is raw, or {} when it is empty.
func payloadOr(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	return raw
}
