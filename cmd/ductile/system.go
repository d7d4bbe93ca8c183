package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/migrations"
)

func systemCommand() *cli.Command {
	return &cli.Command{
		Name:  "system",
		Usage: "run and maintain the daemon",
		Subcommands: append([]*cli.Command{
			{
				Name:  "start",
				Usage: "run the daemon in the foreground until SIGINT or SIGTERM",
				Description: "Creates the state directory if needed, takes its lock (one daemon per state\n" +
					"directory), applies migrations, and runs until stopped. Logs go to stdout: readable\n" +
					"lines on a terminal, else JSON lines (choose with --log-format json|text).\n" +
					"It refuses a ledger whose newest events were removed (or whose chain is broken after\n" +
					"the last recorded head) unless --allow-damaged-ledger accepts that. When the API's\n" +
					"default address is taken, it runs without the API and says so on stderr too.",
				Flags:  []cli.Flag{allowDamagedFlag()},
				Action: systemStart,
			},
			{
				Name:   "migrate",
				Usage:  "apply pending database migrations",
				Flags:  []cli.Flag{jsonFlag(), dryRunFlag()},
				Action: systemMigrate,
			},
			systemReloadCommand(),
			systemSchedulerCommand(),
			systemStatusCommand(),
		}, breakerCommands()...),
	}
}

func systemStart(c *cli.Context) error {
	e, err := loadEnvWith(c, config.Load) // the daemon resolves every ${VAR}
	if err != nil {
		return err
	}
	log := e.logger(e.stdout, slog.LevelInfo)
	for _, fe := range e.cfg.Unused() {
		log.Warn("config section not used yet", "component", "config", "path", fe.Path, "at", fmt.Sprintf("%s:%d", fe.File, fe.Line), "detail", fe.Msg)
	}
	for _, fe := range e.cfg.IntegrityWarnings {
		log.Warn("config file integrity warning", "component", "config", "file", fe.File, "detail", fe.Msg)
	}
	return ledgerError(daemon.Run(c.Context, daemon.Options{StateDir: e.stateDir, Config: e.cfg, Logger: log,
		Ledger: ledger.Options{AllowDamaged: c.Bool(allowDamagedName)}, Alerts: e.stderr}))
}

func systemMigrate(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	if !c.Bool("dry-run") {
		if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
			return failf("create state dir: %v", err)
		}
	}
	path := daemon.DBPath(e.stateDir)
	current, latest, err := migrations.Status(c.Context, path)
	if err != nil {
		return err
	}
	after := current
	if !c.Bool("dry-run") && current < latest {
		if after, err = migrations.Up(c.Context, path); err != nil {
			return err
		}
	}
	out := map[string]any{"database": path, "version_before": current, "version": after, "latest": latest, "dry_run": c.Bool("dry-run")}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	switch {
	case current == latest:
		fmt.Fprintf(e.stdout, "%s is up to date (schema version %d)\n", path, current)
	case c.Bool("dry-run"):
		fmt.Fprintf(e.stdout, "would migrate %s from version %d to %d (run without --dry-run to apply)\n", path, current, latest)
	default:
		fmt.Fprintf(e.stdout, "migrated %s from version %d to %d\n", path, current, after)
	}
	return nil
}
