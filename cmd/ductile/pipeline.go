package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/pipeline"
)

// pipelineCommand reads the config's pipelines, compiled: what the daemon
// would run. Each subcommand is one entry of its list.
func pipelineCommand() *cli.Command {
	return &cli.Command{
		Name:  "pipeline",
		Usage: "inspect the config's pipelines: list, show, graph and dry-run them",
		Subcommands: []*cli.Command{
			pipelineRunCommand(),
			pipelineRunsCommand(),
			pipelineStatusCommand(),
			{
				Name:   "list",
				Usage:  "list the pipelines: trigger, mode, steps and hash",
				Flags:  []cli.Flag{jsonFlag()},
				Action: pipelineList,
			},
			{
				Name:      "show",
				Usage:     "print a pipeline's compiled form, its nodes in order (calls inlined)",
				ArgsUsage: "PIPELINE",
				Flags:     []cli.Flag{jsonFlag()},
				Action:    pipelineShow,
			},
			{
				Name:      "graph",
				Usage:     "print a pipeline as a Mermaid flowchart",
				ArgsUsage: "PIPELINE",
				Action:    pipelineGraph,
			},
			{
				Name:  "dry-run",
				Usage: "walk a pipeline without running anything, or (--step) run one step's real plugin in a sandbox",
				Description: "Without --step: walks the pipeline from its first step, running nothing. The first step's\n" +
					"on, if, with and baggage are evaluated against --event and --payload; a later step's input is\n" +
					"the output of the step before it, unknown here, so what reads it there is reported as depending\n" +
					"on that output, while context.* and config.* are evaluated.\n" +
					"With --step STEP: runs that step's plugin once (no retry), with its real config and the state it\n" +
					"has in the ledger, through the daemon's runner, against a scratch state directory that is deleted\n" +
					"afterwards: it prints the plugin's response, the events it emitted and what the pipeline would do\n" +
					"next. Nothing is recorded in the ledger; a running daemon is neither needed nor disturbed. What\n" +
					"the plugin itself does outside Ductile (files, network) is not undone. Exit status 1 if the\n" +
					"plugin's attempt failed.",
				ArgsUsage: "PIPELINE",
				Flags: []cli.Flag{jsonFlag(),
					&cli.StringFlag{Name: "payload", Usage: "`JSON` payload of the event the first step (or --step) receives (default {}); @FILE reads it from FILE, - from stdin"},
					&cli.StringFlag{Name: "event", Usage: "`TYPE` of that event (default ductile.pipeline, what a run from the API or CLI starts with); a step's on: is matched against it"},
					&cli.StringFlag{Name: "step", Usage: "run this `STEP`'s real plugin in a sandbox (see above)"},
					&cli.StringFlag{Name: "context", Usage: "with --step, the baggage the step inherits, a `JSON` object (default {})"}},
				Action: pipelineDryRun,
			},
		},
	}
}

// loadPipelines loads the config and compiles its pipelines (the plugins
// are not looked up: ductile config check does that).
func loadPipelines(c *cli.Context) (*env, *pipeline.Set, error) {
	e, err := loadEnv(c)
	if err != nil {
		return nil, nil, err
	}
	set, err := pipeline.Compile(e.cfg, nil)
	if err != nil {
		return nil, nil, withHint(errcode.InvalidConfig, err, "fix the pipelines: section, then check the file with: ductile config check")
	}
	return e, set, nil
}

// namedPipeline is the pipeline named by the command's argument.
func namedPipeline(c *cli.Context) (*env, *pipeline.Pipeline, error) {
	e, set, err := loadPipelines(c)
	if err != nil {
		return nil, nil, err
	}
	name := c.Args().First()
	p, ok := set.Pipelines[name]
	if !ok {
		names := set.Names()
		suggestion := ""
		if s := config.Suggest(name, names); s != "" {
			suggestion = ": did you mean " + s + "?"
		}
		return nil, nil, hintf(errcode.NotFound, "see: ductile pipeline list", "no pipeline named %q in the config%s", name, suggestion)
	}
	return e, p, nil
}

// pipelineSummary is one line of pipeline list: the Summary GET /pipelines
// serves too, and whether a running daemon runs this version.
type pipelineSummary struct {
	pipeline.Summary
	// Applied, when a daemon runs, says whether it runs this version.
	Applied *bool `json:"applied,omitempty"`
}

func pipelineList(c *cli.Context) error {
	e, set, err := loadPipelines(c)
	if err != nil {
		return err
	}
	out := []pipelineSummary{}
	a, running := runningApplied(c, e)
	for _, name := range set.Names() {
		p := set.Pipelines[name]
		out = append(out, pipelineSummary{Summary: p.Summary(), Applied: pipelineApplied(a.ConfigAppliedData, running, p.Name, p.Hash)})
	}
	if c.Bool("json") {
		return printJSON(e.stdout, struct {
			Pipelines []pipelineSummary `json:"pipelines"`
		}{out})
	}
	if len(out) == 0 {
		fmt.Fprintln(e.stdout, "no pipelines in the config (add a pipelines: section; see docs/pipelines.md)")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTRIGGER\tMODE\tSTEPS\tHASH")
	for i, s := range out {
		note := ""
		if s.Applied != nil && !*s.Applied {
			note = "\t# not applied yet (see: ductile pipeline show " + s.Name + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s%s\n", s.Name, set.Pipelines[out[i].Name].Trigger(), s.ExecutionMode, s.Steps, shortHash(s.Hash), note)
	}
	return tw.Flush()
}

// pipelineShown is pipeline show's JSON: the compiled form, nodes in order.
type pipelineShown struct {
	*pipeline.Pipeline
	Nodes []*pipeline.Node `json:"nodes"`
	// Applied, when a daemon runs, says whether it runs this version.
	Applied *bool `json:"applied,omitempty"`
}

func pipelineShow(c *cli.Context) error {
	e, p, err := namedPipeline(c)
	if err != nil {
		return err
	}
	a, running := runningApplied(c, e)
	applied := pipelineApplied(a.ConfigAppliedData, running, p.Name, p.Hash)
	if c.Bool("json") {
		return printJSON(e.stdout, pipelineShown{Pipeline: p, Nodes: p.Order(), Applied: applied})
	}
	w := e.stdout
	fmt.Fprintf(w, "pipeline %s (%s:%d)\n", p.Name, p.File, p.Line)
	fmt.Fprintf(w, "  trigger         %s\n", p.Trigger())
	fmt.Fprintf(w, "  execution_mode  %s (timeout %s)\n", p.ExecutionMode, p.Timeout)
	fmt.Fprintf(w, "  max_depth       %d\n", p.MaxDepth)
	fmt.Fprintf(w, "  hash            %s\n", p.Hash)
	if applied != nil && !*applied {
		fmt.Fprintf(w, "  %s\n", notAppliedNote(a.ConfigAppliedData, p.Name))
	}
	fmt.Fprintf(w, "nodes (entry %s):\n", p.Entry)
	for _, n := range p.Order() {
		what := n.Plugin + "." + n.Command
		if n.Kind == pipeline.KindSplit {
			what = "split [" + strings.Join(n.Branches, ", ") + "]"
			if n.ContinueOnError {
				what += " continue_on_error"
			}
		}
		fmt.Fprintf(w, "  %s: %s", n.ID, what)
		next := n.Next
		if next == "" {
			next = "(end)"
		}
		if n.Kind == pipeline.KindSplit {
			fmt.Fprintf(w, " -> join %s\n", next)
		} else {
			fmt.Fprintf(w, " -> %s\n", next)
		}
		if n.Gated() {
			bypass := n.Bypass()
			if bypass == "" {
				bypass = "(end)"
			}
			fmt.Fprintf(w, "      %s (false: %s)\n", n.Gate(), bypass)
		}
		for _, k := range slices.Sorted(maps.Keys(n.With)) {
			fmt.Fprintf(w, "      with %s = %s\n", k, n.With[k])
		}
		for _, cl := range n.Baggage {
			if cl.Namespace != "" {
				fmt.Fprintf(w, "      baggage context.%s <- %s (bulk)\n", cl.Namespace, cl.From)
			} else {
				fmt.Fprintf(w, "      baggage context.%s <- %s\n", cl.Path, cl.From)
			}
		}
	}
	return nil
}

func pipelineGraph(c *cli.Context) error {
	e, p, err := namedPipeline(c)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(e.stdout, p.Mermaid())
	return err
}

func pipelineDryRun(c *cli.Context) error {
	e, p, err := namedPipeline(c)
	if err != nil {
		return err
	}
	payload, err := readObjectPayload(c)
	if err != nil {
		return err
	}
	if c.IsSet("step") {
		return pipelineSandbox(c, e, p, payload)
	}
	if c.IsSet("context") {
		return usagef("--context needs --step: it is the baggage the step given by --step inherits (a walk starts with none)")
	}
	steps, err := p.DryRun(c.String("event"), payload, func(plugin string) json.RawMessage {
		b, err := json.Marshal(e.cfg.Plugin(plugin).Config)
		if err != nil {
			return nil
		}
		return b
	})
	if err != nil {
		return usagef("%v", err)
	}
	if c.Bool("json") {
		return printJSON(e.stdout, struct {
			Pipeline string             `json:"pipeline"`
			Hash     string             `json:"hash"`
			Steps    []pipeline.DryStep `json:"steps"`
		}{p.Name, p.Hash, steps})
	}
	w := e.stdout
	fmt.Fprintf(w, "dry run of pipeline %s (nothing is enqueued)\n", p.Name)
	for _, s := range steps {
		indent := strings.Repeat("  ", s.Depth+1)
		what := s.Plugin + "." + s.Command
		if s.Kind != pipeline.KindUses {
			what = s.Kind
		}
		fmt.Fprintf(w, "%s%s (%s): %s", indent, s.Node, what, s.Outcome)
		if s.Reason != "" {
			fmt.Fprintf(w, ": %s", s.Reason)
		}
		fmt.Fprintln(w)
		switch {
		case s.Input != nil:
			fmt.Fprintf(w, "%s  input   %s\n", indent, compactJSON(s.Input))
		case s.InputFrom != "":
			fmt.Fprintf(w, "%s  input   depends on %s\n", indent, s.InputFrom)
		}
		fmt.Fprintf(w, "%s  context %s\n", indent, compactJSON(s.Context))
		for _, pending := range s.Pending {
			fmt.Fprintf(w, "%s  pending context.%s\n", indent, pending)
		}
	}
	return nil
}

// compactJSON is raw on one line.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
