package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginsource"
	"github.com/ductile/ductile/views"
)

func pluginShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show a plugin: as it is loaded, its health, its state (plugin_state), its job totals and its last runs",
		ArgsUsage: "PLUGIN",
		Description: "The plugin as the running daemon loaded it (with none, as found now), its health, its\n" +
			"state as the plugin_state compatibility view mirrors it, how many of its jobs ended each way,\n" +
			"and its newest jobs (--jobs), newest first. A plugin no longer loaded whose jobs the ledger\n" +
			"holds is shown too.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "jobs", Value: 10, Usage: "show its `N` newest jobs"},
			jsonFlag(),
		},
		Action: withReadLedger(pluginShow),
	}
}

func pluginLogsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "show the last log lines of a plugin's jobs: stderr and the logs of their responses",
		ArgsUsage: "PLUGIN",
		Description: fmt.Sprintf("The last --lines lines of its newest jobs (at most %d of them), oldest first, each with\n"+
			"its job, the attempt and where it came from (stderr, or the level of a log entry in a\n"+
			"response), as job logs prints them. --follow goes on printing the lines of its jobs as they\n"+
			"come, those of jobs enqueued later too, until interrupted. --json prints an array, or with\n"+
			"--follow one object per line.", views.MaxPluginLogJobs),
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "lines", Aliases: []string{"n"}, Value: 50, Usage: "show the last `N` lines"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new lines until interrupted"},
			jsonFlag(),
		},
		Action: withReadLedger(pluginLogs),
	}
}

// pluginArg is the PLUGIN argument of plugin show and plugin logs.
func pluginArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usagef("give one PLUGIN (see: ductile plugin list)")
	}
	return c.Args().First(), nil
}

// pluginView reads the plugin's view against the plugins the daemon loaded
// (with none, those found now).
func pluginView(c *cli.Context, e *env, l *ledger.Ledger, name string, jobs int) (views.PluginView, error) {
	set, err := currentEngine(c.Context, e, l)
	if err != nil {
		return views.PluginView{}, err
	}
	v, err := views.ShowPlugin(c.Context, l, set.Applied(), name, jobs)
	if errors.Is(err, commands.ErrPluginUnknown) {
		_, err = set.Plugin(name)
		err = set.refused(err, false) // the CLI's words: the nearest name, and what there is
	}
	return v, err
}

func pluginShow(c *cli.Context, e *env, l *ledger.Ledger) error {
	name, err := pluginArg(c)
	if err != nil {
		return err
	}
	if c.Int("jobs") < 0 {
		return usagef("--jobs must be 0 or more")
	}
	v, err := pluginView(c, e, l, name, c.Int("jobs"))
	if err != nil {
		return err
	}
	// Where plugin add installed it from, if it did.
	var source *sourceOut
	if v.Plugin != nil {
		if rec, err := pluginsource.ReadRecord(v.Plugin.Dir); err == nil && rec != nil {
			s := sourceOf(*rec)
			source = &s
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, struct {
			views.PluginView
			Source *sourceOut `json:"source"`
		}{v, source})
	}
	w := e.stdout
	switch p := v.Plugin; {
	case p != nil && p.Enabled:
		fmt.Fprintf(w, "plugin    %s %s\n", p.Name, p.Version)
	case p != nil:
		fmt.Fprintf(w, "plugin    %s %s (disabled in the config)\n", p.Name, p.Version)
	case v.Skipped != "":
		fmt.Fprintf(w, "plugin    %s: not loaded: %s\n", v.Name, v.Skipped)
	default:
		fmt.Fprintf(w, "plugin    %s: not loaded (its jobs are in the ledger)\n", v.Name)
	}
	if p := v.Plugin; p != nil {
		var cmds []string
		for _, cmd := range p.Commands {
			cmds = append(cmds, cmd.Name+"("+cmd.Type+")")
		}
		fmt.Fprintf(w, "dir       %s\ncommands  %s\n", p.Dir, strings.Join(cmds, " "))
	}
	if source != nil {
		fmt.Fprintf(w, "source    %s at %s (ductile plugin update %s moves it)\n", source.where(), source.pin(), v.Name)
	}
	fmt.Fprintf(w, "health    %s\n", v.Health.Summary)
	if v.StateUpdatedAt != nil {
		fmt.Fprintf(w, "state     %s (updated %s, seq %d)\n", oneLine(string(v.State), 200), *v.StateUpdatedAt, v.StateUpdatedSeq)
	} else {
		fmt.Fprintln(w, "state     {} (none recorded)")
	}
	t := v.Totals
	fmt.Fprintf(w, "ended     %d succeeded, %d dead, %d canceled\n", t[events.StatusSucceeded], t[events.StatusDead], t[events.StatusCanceled])
	if len(v.Jobs) == 0 {
		fmt.Fprintln(w, "\nno jobs")
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tCOMMAND\tSTATUS\tATTEMPT\tSTARTED\tCOMPLETED\tLAST ERROR")
	for _, j := range v.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", views.ShortID(j.ID), j.Command, j.Status, j.Attempt, j.MaxAttempts,
			orDash(j.StartedAt), orDash(j.CompletedAt), oneLine(deref(j.LastError), 60))
	}
	return tw.Flush()
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func pluginLogs(c *cli.Context, e *env, l *ledger.Ledger) error {
	name, err := pluginArg(c)
	if err != nil {
		return err
	}
	n := c.Int("lines")
	if n < 1 {
		return usagef("--lines must be 1 or more")
	}
	if _, err := pluginView(c, e, l, name, 0); err != nil {
		return err
	}
	ctx, asJSON := c.Context, c.Bool("json")
	print := func(line views.PluginLogLine) error {
		if asJSON {
			return printJSONLine(e, line)
		}
		_, err := fmt.Fprintf(e.stdout, "%s %s\n", line.JobID, logLineText(line.LogLine))
		return err
	}
	if !c.Bool("follow") {
		lines, err := views.PluginLogs(ctx, l, name, n, 0)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(e.stdout, lines)
		}
		if len(lines) == 0 {
			fmt.Fprintf(e.stdout, "no log lines of plugin %s's jobs\n", name)
		}
		for _, line := range lines {
			if err := print(line); err != nil {
				return err
			}
		}
		return nil
	}
	err = views.FollowPluginLogs(ctx, l, name, n, print)
	if ctx.Err() != nil {
		return nil // interrupted: that is how --follow ends
	}
	return err
}
