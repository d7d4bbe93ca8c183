package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// breakerCommands are system breaker and system reset (spec §5.8).
func breakerCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:      "breaker",
			Usage:     "show the circuit breakers of scheduled jobs: state, failures, next probe and history",
			ArgsUsage: "[PLUGIN]",
			Description: "A breaker guards one plugin command's scheduled jobs: after circuit_breaker.threshold\n" +
				"scheduled jobs in a row end dead it opens, and the scheduler enqueues none until\n" +
				"reset_after has passed; then one probe job runs: its success closes the breaker, its\n" +
				"failure opens it again. Jobs from the CLI, the API, webhooks and routes never count and\n" +
				"are never held back. A plugin command not listed is closed with nothing counted.",
			Flags: []cli.Flag{
				&cli.IntFlag{Name: "history", Value: views.DefaultBreakerHistory, Usage: "show the newest `N` transitions of each breaker"},
				jsonFlag(),
			},
			Action: withReadLedger(systemBreaker),
		},
		{
			Name:      "reset",
			Usage:     "close a plugin's circuit breakers by hand and clear their failure counts",
			ArgsUsage: "PLUGIN",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "command", Usage: "only the breaker of `COMMAND` (default: every breaker of the plugin)"},
				jsonFlag(), dryRunFlag(),
			},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usagef("system reset takes one PLUGIN, got %d arguments", c.NArg())
				}
				return withExistingLedger(systemReset)(c)
			},
		},
	}
}

func systemBreaker(c *cli.Context, e *env, l *ledger.Ledger) error {
	if c.NArg() > 1 {
		return usagef("system breaker takes at most one PLUGIN, got %d arguments", c.NArg())
	}
	if c.Int("history") < 0 {
		return usagef("--history must be 0 or more, got %d", c.Int("history"))
	}
	plugin := c.Args().First()
	breakers, err := views.ReadBreakers(c.Context, l, plugin, c.Int("history"))
	if err != nil {
		return err
	}
	if plugin != "" && len(breakers) == 0 {
		if _, _, err := breakerPlugin(c.Context, e, l, plugin); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, map[string]any{"breakers": breakers})
	}
	if len(breakers) == 0 {
		if plugin != "" {
			fmt.Fprintf(e.stdout, "plugin %s: no breaker has counted a failure (all closed)\n", plugin)
		} else {
			fmt.Fprintln(e.stdout, "no breaker has counted a failure (all closed)")
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tCOMMAND\tSTATE\tFAILURES\tSINCE\tNEXT PROBE\tLAST ERROR")
	for _, b := range breakers {
		// Closed: the count toward the threshold; open or half-open the
		// threshold is passed, and a failed probe counts on past it.
		since, probe, failures := b.UpdatedAt, "-", fmt.Sprintf("%d/%d", b.Failures, b.Threshold)
		if b.State != string(events.BreakerStateClosed) {
			failures = fmt.Sprintf("%d in a row", b.Failures)
		}
		switch b.State {
		case string(events.BreakerStateOpen):
			since, probe = deref(b.OpenedAt), deref(b.ProbeAt)
		case string(events.BreakerStateHalfOpen):
			probe = "running: job " + deref(b.ProbeJobID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Plugin, b.Command, b.State, failures,
			since, probe, oneLine(deref(b.LastError), 60))
	}
	tw.Flush()
	for _, b := range breakers {
		if len(b.History) == 0 {
			continue
		}
		fmt.Fprintf(e.stdout, "\n%s %s, newest first:\n", b.Plugin, b.Command)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		for _, h := range b.History {
			detail := ""
			if h.JobID != nil {
				detail = "job " + *h.JobID
			}
			if h.Actor != nil && h.To == string(events.BreakerStateClosed) && h.Reason == string(events.BreakerReasonManualReset) {
				detail = "by " + *h.Actor
			}
			fmt.Fprintf(tw, "  %s\t%s → %s\t%s\t%d failures\t%s\n", h.At, orUnknown(deref(h.From)), h.To, h.Reason, h.Failures, detail)
		}
		tw.Flush()
	}
	return nil
}

// resetOutput is one breaker in system reset's --json output.
type resetOutput struct {
	Command        string `json:"command"`
	StateBefore    string `json:"state_before"`
	FailuresBefore int64  `json:"failures_before"`
	State          string `json:"state"`
	Reset          bool   `json:"reset"` // false: closed with nothing counted, nothing to do
}

func systemReset(c *cli.Context, e *env, l *ledger.Ledger) error {
	plugin, dryRun := c.Args().First(), c.Bool("dry-run")
	if !dryRun {
		// Without a daemon the projections may lag the log: the breakers
		// listed below are read from them.
		if err := daemon.CatchUpUnlessHeld(c.Context, e.stateDir, l, e.quietLogger()); err != nil {
			return err
		}
	}
	var targets []views.Breaker
	command := c.String("command")
	if c.IsSet("command") && command == "" {
		return usagef("--command needs a command name")
	}
	if command != "" {
		b, ok, err := views.ReadBreaker(c.Context, l, plugin, command, 0)
		if err != nil {
			return err
		}
		if !ok {
			if err := breakerCommand(c.Context, e, l, plugin, command); err != nil {
				return err
			}
		}
		targets = []views.Breaker{b}
	} else {
		var err error
		if targets, err = views.ReadBreakers(c.Context, l, plugin, 0); err != nil {
			return err
		}
		if len(targets) == 0 {
			if _, _, err := breakerPlugin(c.Context, e, l, plugin); err != nil {
				return err
			}
		}
	}
	var out []resetOutput
	for _, b := range targets {
		r := resetOutput{Command: b.Command, StateBefore: b.State, FailuresBefore: b.Failures, State: b.State}
		if dryRun {
			r.Reset = b.State != string(events.BreakerStateClosed) || b.Failures > 0
		} else {
			// The command decides on the breaker's stream, not on the
			// projection read above.
			res, err := commands.ResetBreaker(c.Context, l, commands.Reset{Plugin: plugin, Command: b.Command, Actor: events.ActorCLI, Now: time.Now()})
			if err != nil {
				return err
			}
			r.StateBefore, r.FailuresBefore, r.Reset = string(res.Before.State), int64(res.Before.Failures), res.Reset
			r.State = string(events.BreakerStateClosed)
		}
		out = append(out, r)
	}
	if !dryRun {
		// So that system breaker shows the reset at once.
		if err := daemon.CatchUpUnlessHeld(c.Context, e.stateDir, l, e.quietLogger()); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		if out == nil {
			out = []resetOutput{}
		}
		return printJSON(e.stdout, map[string]any{"plugin": plugin, "dry_run": dryRun, "breakers": out})
	}
	done := false
	for _, r := range out {
		switch {
		case !r.Reset:
			continue
		case dryRun:
			fmt.Fprintf(e.stdout, "would reset breaker %s %s: %s with %d failures → closed (run without --dry-run to do it)\n",
				plugin, r.Command, r.StateBefore, r.FailuresBefore)
		default:
			fmt.Fprintf(e.stdout, "reset breaker %s %s: %s with %d failures → closed\n", plugin, r.Command, r.StateBefore, r.FailuresBefore)
		}
		done = true
	}
	switch {
	case done:
	case command != "":
		fmt.Fprintf(e.stdout, "nothing to reset: breaker %s %s is closed with no failures\n", plugin, command)
	default:
		fmt.Fprintf(e.stdout, "nothing to reset: every breaker of plugin %s is closed with no failures\n", plugin)
	}
	return nil
}

// breakerPlugin is plugin as the running daemon loaded it (or, without a
// daemon, as this process discovers it), for a breaker command naming a
// plugin with no breaker row: not_found, with the nearest name, when there
// is no such plugin. A disabled or skipped plugin is known (ok false: no
// commands to check).
func breakerPlugin(ctx context.Context, e *env, l *ledger.Ledger, plugin string) (p events.AppliedPlugin, ok bool, err error) {
	set, err := currentEngine(ctx, e, l)
	if err != nil {
		return p, false, err
	}
	var names []string
	for _, p := range set.Applied().Plugins {
		if p.Name == plugin {
			return p, true, nil
		}
		names = append(names, p.Name)
	}
	for _, sk := range set.Applied().Skipped {
		if sk.Name == plugin {
			return p, false, nil
		}
	}
	return p, false, hintf(errcode.NotFound, fmt.Sprintf("%s: %s; see: ductile plugin list", set.which(), orNothing(names)),
		"no plugin named %q%s", plugin, didYouMean(plugin, names))
}

// breakerCommand checks, for a breaker command naming a plugin's command
// with no breaker row, that the plugin has that command: not_found, with
// the nearest name, when it does not.
func breakerCommand(ctx context.Context, e *env, l *ledger.Ledger, plugin, command string) error {
	p, ok, err := breakerPlugin(ctx, e, l, plugin)
	if err != nil || !ok {
		return err
	}
	var names []string
	for _, c := range p.Commands {
		if c.Name == command {
			return nil
		}
		names = append(names, c.Name)
	}
	return hintf(errcode.NotFound, "its commands: "+orNothing(names), "plugin %q has no command %q%s", plugin, command, didYouMean(command, names))
}
