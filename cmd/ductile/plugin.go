package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/pluginsource"
	"github.com/ductile/ductile/views"
)

func pluginCommand() *cli.Command {
	return &cli.Command{
		Name:  "plugin",
		Usage: "list, run, inspect, add, update and remove plugins",
		Subcommands: append([]*cli.Command{
			{
				Name:   "list",
				Usage:  "list discovered plugins, and those skipped with the reason",
				Flags:  []cli.Flag{jsonFlag()},
				Action: pluginList,
			},
			{
				Name:      "run",
				Usage:     "enqueue a job for a plugin; without a running daemon, run it here and now",
				ArgsUsage: "PLUGIN",
				Description: "Enqueues a job through the same command every producer uses. When a daemon runs\n" +
					"on the state directory it runs the job; --wait blocks until the job is finished.\n" +
					"When no daemon runs, this command takes the daemon's place until the job is\n" +
					"finished (retries included), on the same ledger. Exit status 1 if the job ends dead.\n" +
					"An unknown, skipped or disabled plugin, or a command the plugin does not declare,\n" +
					"is refused before anything is enqueued (exit 1): with a daemon running, against the\n" +
					"plugins it loaded; without one, against the plugins found now.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "command", Usage: "plugin `COMMAND` to run (default: handle if a payload is given and the plugin has it, else its only command, else poll)"},
					&cli.StringFlag{Name: "payload", Usage: "`JSON` payload, handed to the plugin as event.payload; @FILE reads it from FILE, - from stdin"},
					&cli.StringFlag{Name: "dedupe-key", Usage: "drop this job if one with the same `KEY` succeeded recently (spec §3.6)"},
					&cli.DurationFlag{Name: "dedupe-ttl", Usage: "dedupe window for this job; also drops it while one with the key is queued or running"},
					&cli.BoolFlag{Name: "wait", Usage: "with a daemon running, wait until the job is finished (not the jobs it routes: see --wait-tree)"},
					&cli.BoolFlag{Name: waitTreeName, Usage: "with a daemon running, wait until the job and every job routed from it, at any depth, are finished, and print their tree (exit 1 unless all succeeded)"},
					&cli.DurationFlag{Name: "timeout", Usage: "with --wait or --wait-tree, give up waiting after `DURATION`: the daemon's job goes on; with no daemon, this command, which runs the job, cancels it"},
					jsonFlag(), dryRunFlag(),
				},
				Action: pluginRun,
			},
			pluginHealthCommand(),
			pluginNewCommand(),
			pluginShowCommand(),
			pluginLogsCommand(),
		}, pluginSourceCommands()...),
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
		// Health is what its newest init and health check found.
		Health views.PluginHealth `json:"health"`
		// Source is where plugin add installed it from; nil for a plugin
		// not installed by plugin add.
		Source *sourceOut `json:"source"`
	}
	type skippedOut struct {
		Name   string `json:"name"`
		Dir    string `json:"dir"`
		Reason string `json:"reason"`
	}
	out := struct {
		Plugins []pluginOut  `json:"plugins"`
		Skipped []skippedOut `json:"skipped"`
		// Problems are plugin roots that could not be read.
		Problems []string `json:"problems"`
	}{Plugins: []pluginOut{}, Skipped: []skippedOut{}, Problems: []string{}}
	health := pluginHealthSet(c, e)
	for _, p := range reg.List() {
		po := pluginOut{Name: p.Name, Version: p.Manifest.Version, Description: p.Manifest.Description, Dir: p.Dir,
			ConcurrencySafe: p.Manifest.ConcurrencySafe, Parallelism: e.cfg.Plugin(p.Name).Parallelism, Enabled: e.cfg.Plugin(p.Name).Enabled,
			Health: health.Of(p.Name)}
		if rec, err := pluginsource.ReadRecord(p.Dir); err == nil && rec != nil {
			src := sourceOf(*rec)
			po.Source = &src
		}
		for _, cmd := range p.Manifest.Commands {
			po.Commands = append(po.Commands, cmdOut{Name: cmd.Name, Type: string(cmd.Type)})
		}
		out.Plugins = append(out.Plugins, po)
	}
	for _, p := range reg.Skipped() {
		out.Skipped = append(out.Skipped, skippedOut{Name: p.Name, Dir: p.Dir, Reason: p.Err.Error()})
	}
	for _, p := range problems {
		var pe *pluginhost.PluginError
		if !errors.As(p, &pe) {
			out.Problems = append(out.Problems, p.Error())
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	// SOURCE and PIN appear once a plugin was installed by plugin add.
	sourced := slices.ContainsFunc(out.Plugins, func(p pluginOut) bool { return p.Source != nil })
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if sourced {
		fmt.Fprintln(tw, "NAME\tVERSION\tCOMMANDS\tHEALTH\tSOURCE\tPIN\tDIR")
	} else {
		fmt.Fprintln(tw, "NAME\tVERSION\tCOMMANDS\tHEALTH\tDIR")
	}
	for _, p := range out.Plugins {
		var names []string
		for _, c := range p.Commands {
			names = append(names, c.Name+"("+c.Type+")")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", p.Name, p.Version, strings.Join(names, " "), oneLine(p.Health.Summary, 100))
		if sourced {
			source, pin := "-", "-"
			if p.Source != nil {
				source, pin = p.Source.where(), p.Source.pin()
			}
			fmt.Fprintf(tw, "%s\t%s\t", source, pin)
		}
		fmt.Fprintf(tw, "%s\n", p.Dir)
	}
	tw.Flush()
	for _, s := range out.Skipped {
		fmt.Fprintf(e.stdout, "skipped %s (%s): %s\n", s.Name, s.Dir, s.Reason)
	}
	for _, s := range out.Problems {
		fmt.Fprintf(e.stdout, "problem: %s\n", s)
	}
	return nil
}
