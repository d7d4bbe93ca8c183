package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

func pluginHealthCommand() *cli.Command {
	return &cli.Command{
		Name:      "health",
		Usage:     "run plugins' health commands now and show what they found",
		ArgsUsage: "[PLUGIN...]",
		Description: "Runs the health command of each named plugin (every discovered plugin by default),\n" +
			"at most 4 at once, each bounded by its timeouts.health, and records each result\n" +
			"(plugin.health_checked) so that plugin list shows it. A plugin without a health\n" +
			"command is reported as such, not as unhealthy. Exit status 1 if any is unhealthy, or\n" +
			"not_checked: its config needs a ${VAR} this shell does not set (the daemon has it).",
		Flags:  []cli.Flag{jsonFlag()},
		Action: pluginHealth,
	}
}

func pluginHealth(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	reg, err := daemon.LoadPlugins(e.stateDir, e.cfg, e.quietLogger())
	if err != nil {
		return err
	}
	l, err := e.openLedger(c.Context)
	if err != nil {
		return err
	}
	defer l.Close()
	reports, err := daemon.CheckHealth(c.Context, daemon.HealthOptions{
		Ledger: l, Plugins: reg, Config: e.cfg, Logger: e.quietLogger(), Names: c.Args().Slice(), Actor: events.ActorCLI,
	})
	if errors.Is(err, daemon.ErrUnknownPlugin) {
		return notFoundf("%v", err)
	}
	if err != nil {
		return err
	}
	// So that plugin list shows the results at once.
	if err := daemon.CatchUpUnlessHeld(c.Context, e.stateDir, l, e.quietLogger()); err != nil {
		return err
	}
	unhealthy := false
	for _, r := range reports {
		unhealthy = unhealthy || r.Status == events.Unhealthy || r.Status == daemon.HealthUnset
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, struct {
			Plugins []daemon.HealthReport `json:"plugins"`
		}{append([]daemon.HealthReport{}, reports...)}); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PLUGIN\tSTATUS\tMS\tMESSAGE")
		for _, r := range reports {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Plugin, r.Status, r.DurationMS, r.Message)
		}
		tw.Flush()
	}
	if unhealthy {
		return silent(exitFailure)
	}
	return nil
}

// pluginHealthSet is the plugins' recorded health for a listing: empty
// (every plugin "not checked") when there is no ledger yet, and, with a
// warning, when it cannot be read: a listing does not fail for it.
func pluginHealthSet(c *cli.Context, e *env) views.PluginHealthSet {
	if _, err := os.Stat(daemon.DBPath(e.stateDir)); errors.Is(err, fs.ErrNotExist) {
		return views.PluginHealthSet{}
	}
	l, err := e.readLedger(c.Context)
	if err == nil {
		defer l.Close()
		var set views.PluginHealthSet
		if set, err = views.ListPluginHealth(c.Context, l); err == nil {
			return set
		}
	}
	e.quietLogger().Warn("plugin health not shown: the ledger could not be read", "component", "cli", "err", err.Error())
	return views.PluginHealthSet{}
}
