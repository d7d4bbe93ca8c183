package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "check and show the configuration",
		Subcommands: []*cli.Command{
			{
				Name:   "check",
				Usage:  "load the config and plugins as the daemon would and report every problem (exit 1 on any error)",
				Flags:  []cli.Flag{jsonFlag()},
				Action: configCheck,
			},
			{
				Name:  "show",
				Usage: "print the merged configuration with secrets redacted",
				Description: "Prints the config file as loaded, every default filled in. While a daemon runs,\n" +
					"a setting whose value differs from what the daemon applied is marked with a\n" +
					"comment (# applied: …); apply the file with: ductile system reload.\n" +
					"--applied prints what the running daemon decides with instead, and when it applied\n" +
					"it (plugin config values and the pipelines, api and webhooks sections by hash only).",
				Flags: []cli.Flag{jsonFlag(),
					&cli.BoolFlag{Name: "applied", Usage: "print the settings the daemon applied (its last config.applied record)"}},
				Action: configShow,
			},
			tokenCommand(), lockCommand(),
		},
	}
}

// checkOutput is what config check prints with --json.
type checkOutput struct {
	OK       bool     `json:"ok"`
	Config   string   `json:"config"`
	Files    []string `json:"files"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
	Plugins  []string `json:"plugins"`
	Skipped  []string `json:"skipped_plugins"`
	StateDir string   `json:"state_dir"`
	// RemotePlugins are the enabled plugins placed runs_on: remote or any,
	// each with the registered workers that serve it (from the state
	// directory's ledger; none when it has no ledger yet).
	RemotePlugins []views.RemotePlugin `json:"remote_plugins"`
}

// configCheck loads the config and discovers the plugins as the daemon
// would, then cross-checks them (daemon.CheckConfig), and reports every
// problem in one run: the files' own, their integrity, and the plugins'.
// Errors exit 1: an invalid config, a file .checksums or its permissions
// refuse, a plugin skipped for a problem, a route or plugin entry naming a
// plugin or command that is not there. Warnings (an undeclared config key,
// a shadowed plugin, a ${VAR} this shell does not set) leave the exit at 0.
func configCheck(c *cli.Context) error {
	path := c.String("config")
	out := checkOutput{Config: path, Files: []string{}, Errors: []string{}, Warnings: []string{}, Plugins: []string{}, Skipped: []string{},
		RemotePlugins: []views.RemotePlugin{}}
	if path == "" {
		out.Config = "(none: built-in defaults)"
	}
	cfg, refused, err := examineConfig(path)
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
	}
	for _, fe := range refused {
		out.Errors = append(out.Errors, fe.Error())
	}
	if cfg != nil {
		out.Files = cfg.Files
		if err := checkPlugins(c, cfg, &out); err != nil {
			return err
		}
	}
	out.OK = len(out.Errors) == 0
	w := c.App.Writer
	if c.Bool("json") {
		if err := printJSON(w, out); err != nil {
			return err
		}
	} else {
		if out.OK {
			fmt.Fprintf(w, "config OK: %s\n", out.Config)
			for _, f := range out.Files {
				fmt.Fprintf(w, "  loaded %s\n", f)
			}
			fmt.Fprintf(w, "state dir %s\n", out.StateDir)
			fmt.Fprintf(w, "plugins: %v\n", out.Plugins)
			printRemotePlugins(w, out.RemotePlugins)
		} else {
			fmt.Fprintf(w, "config has %d problem(s):\n", len(out.Errors))
			for _, e := range out.Errors {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
		printWarnings(w, out.Warnings)
	}
	if !out.OK {
		return silent(exitFailure)
	}
	return nil
}

// examineConfig loads the config at path (the built-in defaults for "")
// as config.Examine does, a ${VAR} this shell does not set left to the
// daemon: the config, when its files decode, and every problem that
// refuses it.
func examineConfig(path string) (*config.Config, []config.FieldError, error) {
	if path == "" {
		return config.Default(), nil, nil
	}
	return config.Examine(path, true)
}

// printWarnings prints warnings under a count, if there are any.
func printWarnings(w io.Writer, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	fmt.Fprintf(w, "%d warning(s):\n", len(warnings))
	for _, e := range warnings {
		fmt.Fprintf(w, "  %s\n", e)
	}
}

// checkPlugins discovers the plugins for cfg and adds to out what they
// are, which were skipped and why, and what daemon.CheckConfig finds.
func checkPlugins(c *cli.Context, cfg *config.Config, out *checkOutput) error {
	e, err := newEnv(c, cfg)
	if err != nil {
		return err
	}
	out.StateDir = e.stateDir
	reg, problems, err := daemon.DiscoverPlugins(e.stateDir, cfg, e.quietLogger())
	if err != nil {
		return err
	}
	for _, p := range reg.List() {
		out.Plugins = append(out.Plugins, p.Name)
	}
	for _, p := range problems {
		out.Skipped = append(out.Skipped, p.Error())
	}
	fleet, registrations, err := readFleetIfAny(c.Context, e)
	if err != nil {
		// The config is checked without them: the ledger is the daemon's
		// business, and config check must work before it can be read.
		out.Warnings = append(out.Warnings, fmt.Sprintf("the registered remote workers were not read (%v): which workers serve the remote plugins is not shown", err))
	}
	f, err := daemon.CheckConfig(cfg, reg, problems, daemon.RegisteredPlugins(registrations))
	if err != nil {
		return err
	}
	out.Errors, out.Warnings = append(out.Errors, f.Errors...), append(out.Warnings, f.Warnings...)
	remote, warnings := daemon.CheckRemote(cfg, func(name string) bool { _, ok := reg.Get(name); return ok }, fleet, time.Now())
	out.RemotePlugins, out.Warnings = remote, append(out.Warnings, warnings...)
	return nil
}

// readFleetIfAny reads the registered workers from the state directory's
// ledger, read-only, with their registrations; none when there is no
// ledger yet.
func readFleetIfAny(ctx context.Context, e *env) ([]views.FleetWorker, map[string]events.WorkerRegisteredData, error) {
	l, err := ledger.Open(ctx, daemon.DBPath(e.stateDir), ledger.Options{ReadOnly: true, Logger: e.quietLogger()})
	if errors.Is(err, ledger.ErrNoLedger) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, ledgerError(err)
	}
	defer l.Close()
	fleet, err := views.ReadFleet(ctx, l)
	if err != nil {
		return nil, nil, err
	}
	registrations, err := engine.ReadRegistrations(ctx, l)
	return fleet, registrations, err
}

// printRemotePlugins prints which workers serve each remote plugin.
func printRemotePlugins(w io.Writer, plugins []views.RemotePlugin) {
	for _, p := range plugins {
		here := ""
		if p.Installed {
			here = ", installed here"
		}
		fmt.Fprintf(w, "remote    %s (runs_on: %s%s): %s\n", p.Plugin, p.RunsOn, here, servedBy(p))
	}
}

// servedBy says which workers serve p, one phrase each.
func servedBy(p views.RemotePlugin) string {
	if len(p.Workers) == 0 {
		return "served by no registered worker"
	}
	parts := make([]string, len(p.Workers))
	for i, w := range p.Workers {
		state := "idle or gone: it holds no live lease"
		if w.Live {
			state = "live: it holds a live lease"
		}
		parts[i] = fmt.Sprintf("%s on %s (last seen %s; %d running of this plugin, %d under a live lease; %s)",
			w.Name, dashIfEmpty(w.Host), dashIfEmpty(w.LastSeen), w.Claims, w.LiveClaims, state)
	}
	return "served by " + strings.Join(parts, ", ")
}

func configShow(c *cli.Context) error {
	if c.Bool("applied") {
		e, err := daemonEnv(c)
		if err != nil {
			return err
		}
		return configShowApplied(c, e)
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	shown := e.cfg.Redacted()
	if c.Bool("json") {
		return printJSON(e.stdout, shown)
	}
	var n yaml.Node
	if err := n.Encode(shown); err != nil {
		return err
	}
	if a, ok := runningApplied(c, e); ok {
		diffs, notes := comparable(e.cfg, config.DiffSettings(e.cfg.Settings(), a.Settings))
		for _, note := range notes {
			fmt.Fprintf(e.stderr, "note: %s\n", note)
		}
		markDifferences(&n, diffs, a)
	}
	b, err := yaml.Marshal(&n)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}
