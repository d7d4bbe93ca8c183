package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

// Exit codes. Every error maps to one of these in exitCode, and only there.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and found a problem, or failed
	exitUsage   = 2 // bad flags or arguments
)

// exitError carries an exit code and an already-printed or plain message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// failf makes an error that exits 1 with a message saying what to do next.
func failf(format string, args ...any) error {
	return &exitError{code: exitFailure, msg: fmt.Sprintf(format, args...)}
}

// usagef makes an error that exits 2.
func usagef(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// silent exits with code without printing anything more (the command has
// already reported, e.g. verify's findings).
func silent(code int) error { return &exitError{code: code} }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	return exitCode(app.RunContext(ctx, normalizeArgs(app, args)), stderr)
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(stderr, "ductile: %s\n", ee.msg)
		}
		return ee.code
	}
	if errors.Is(err, context.Canceled) {
		return exitFailure
	}
	fmt.Fprintf(stderr, "ductile: %v\n", err)
	return exitFailure
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "ductile",
		Usage: "run personal automations unattended",
		Description: "Ductile keeps one durable queue of jobs, runs plugins as subprocesses and records\n" +
			"every step in an event-sourced SQLite ledger. Commands are NOUN ACTION.\n" +
			"Global flags (--config, --state-dir, --verbose) may appear anywhere on the line.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"DUCTILE_CONFIG"}, Usage: "config `FILE` (default: none, built-in defaults)"},
			&cli.StringFlag{Name: "state-dir", EnvVars: []string{"DUCTILE_STATE_DIR"}, Usage: "state `DIR` holding the ledger and lock (default: config's state_dir, else $XDG_STATE_HOME/ductile)"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log debug detail to stderr"},
		},
		Commands:             []*cli.Command{systemCommand(), ledgerCommand(), pluginCommand(), jobCommand(), queueCommand(), configCommand(), benchCommand()},
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		ExitErrHandler:       func(*cli.Context, error) {}, // exitCode reports errors
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usagef("%v (see: ductile --help)", err)
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unknown command %q (see: ductile --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
	finishTree(app.Commands, "")
	return app
}

// normalizeArgs lets flags go anywhere, as users expect: global flags are
// moved in front of the command, and a leaf command's own flags in front of
// its positional arguments (urfave/cli v2 stops parsing flags at the first
// positional, so `plugin run echo --payload {}` would otherwise lose the flag).
// A literal "--" ends flag handling; what follows stays positional. A word
// that is not a command ends command matching, so urfave reports it.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	globals := flagKinds(app.Flags)
	delete(globals, "help") // --help belongs to the command it follows
	delete(globals, "h")
	var front, path, leafFlags, positional, afterDashes, dangling []string
	var leaf *cli.Command
	cmds := app.Commands
	matching := true
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		tok := rest[i]
		if tok == "--" {
			afterDashes = append([]string{"--"}, rest[i+1:]...)
			break
		}
		if name, hasValue, ok := parseFlag(tok); ok {
			takesValue, isGlobal := globals[name]
			dst := &front
			if !isGlobal {
				dst = &leafFlags
				takesValue = leaf != nil && flagKinds(leaf.Flags)[name]
				if leaf == nil {
					dst = &path // a flag of a command we have not reached: keep its place
				}
			}
			switch {
			case takesValue && !hasValue && i+1 == len(rest):
				dangling = append(dangling, tok) // last, so the parser reports the missing value
			case takesValue && !hasValue:
				*dst = append(*dst, tok, rest[i+1])
				i++
			default:
				*dst = append(*dst, tok)
			}
			continue
		}
		if matching && leaf == nil {
			path = append(path, tok)
			c := findCommand(cmds, tok)
			switch {
			case c == nil:
				matching = false // unknown: urfave reports it; the rest is positional
			case len(c.Subcommands) > 0:
				cmds = c.Subcommands
			default:
				leaf = c
			}
			continue
		}
		positional = append(positional, tok)
	}
	out := append([]string{args[0]}, front...)
	out = append(out, path...)
	out = append(out, leafFlags...)
	if len(afterDashes) > 0 {
		out = append(out, "--") // flags end here: everything after is an argument
		out = append(out, positional...)
		out = append(out, afterDashes[1:]...)
	} else {
		out = append(out, positional...)
	}
	return append(out, dangling...)
}

// finishTree gives every command the same handling of usage errors (exit 2,
// a one-line message, no help dump on stdout), makes an unknown subcommand a
// usage error, rejects positional arguments where a command takes none, and
// requires exactly one where its ArgsUsage names one (e.g. "JOB_ID"). The
// check runs before the action, so bad input touches nothing.
func finishTree(cmds []*cli.Command, parent string) {
	for _, c := range cmds {
		name := strings.TrimSpace(parent + " " + c.Name)
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return usagef("%v (see: ductile %s --help)", err, name)
		}
		if len(c.Subcommands) > 0 {
			finishTree(c.Subcommands, name)
			c.Action = func(ctx *cli.Context) error {
				if ctx.NArg() > 0 {
					return usagef("unknown command %q for %q (see: ductile %s --help)", ctx.Args().First(), name, name)
				}
				return cli.ShowSubcommandHelp(ctx)
			}
			continue
		}
		if c.Action == nil {
			continue
		}
		action := c.Action
		switch want := strings.Fields(c.ArgsUsage); {
		case len(want) == 0:
			c.Action = func(ctx *cli.Context) error {
				if ctx.NArg() > 0 {
					return usagef("%s takes no arguments, got %q (see: ductile %s --help)", name, ctx.Args().Slice(), name)
				}
				return action(ctx)
			}
		case len(want) == 1 && !strings.ContainsAny(want[0], "[]."):
			see, ok := argSources[want[0]]
			if !ok {
				see = "ductile " + name + " --help"
			}
			c.Action = func(ctx *cli.Context) error {
				switch ctx.NArg() {
				case 1:
					return action(ctx)
				case 0:
					return usagef("%s needs a %s (see: %s)", name, want[0], see)
				default:
					return usagef("%s takes one %s, got %q (see: %s)", name, want[0], ctx.Args().Slice(), see)
				}
			}
		}
	}
}

// argSources names, for an argument a command requires, where to find a
// valid one: what a usage error about it points to (else the command's --help).
var argSources = map[string]string{
	"JOB_ID": "ductile job list",
	"PLUGIN": "ductile plugin list",
}

// flagKinds maps every name and alias of flags to whether it takes a value.
func flagKinds(flags []cli.Flag) map[string]bool {
	m := map[string]bool{"help": false, "h": false}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			m[n] = !isBool
		}
	}
	return m
}

func parseFlag(tok string) (name string, hasValue, ok bool) {
	if len(tok) < 2 || tok[0] != '-' {
		return "", false, false
	}
	name = strings.TrimLeft(tok, "-")
	if name == "" {
		return "", false, false
	}
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i], true, true
	}
	return name, false, true
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// env is what a command needs to know about where it runs.
type env struct {
	stdout, stderr io.Writer
	cfg            *config.Config
	stateDir       string
	verbose        bool
}

// loadEnv loads the config (--config, else the built-in defaults) and
// resolves the state directory from it (see newEnv).
func loadEnv(c *cli.Context) (*env, error) {
	// Global flags live on the root; c.String finds them through the lineage.
	path := c.String("config")
	if path == "" {
		return newEnv(c, config.Default())
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, failf("%v\n(check the file with: ductile config check --config %s)", err, path)
	}
	return newEnv(c, cfg)
}

// newEnv is the environment for an already loaded config. The state
// directory is --state-dir, then $DUCTILE_STATE_DIR (both arrive through the
// flag), then the config's state_dir, then the per-user default.
func newEnv(c *cli.Context, cfg *config.Config) (*env, error) {
	e := &env{
		stdout:  c.App.Writer,
		stderr:  c.App.ErrWriter,
		cfg:     cfg,
		verbose: c.Bool("verbose"),
	}
	switch {
	case c.String("state-dir") != "":
		e.stateDir = c.String("state-dir")
	case cfg.StateDir != "":
		e.stateDir = cfg.StateDir
	default:
		dir, err := defaultStateDir()
		if err != nil {
			return nil, err
		}
		e.stateDir = dir
	}
	abs, err := filepath.Abs(e.stateDir)
	if err != nil {
		return nil, err
	}
	e.stateDir = abs
	return e, nil
}

func defaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "ductile"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", failf("cannot find a state directory: %v (set --state-dir or $DUCTILE_STATE_DIR)", err)
	}
	return filepath.Join(home, ".local", "state", "ductile"), nil
}

// logger writes JSON lines to w at level, or at debug with --verbose. The
// daemon logs to stdout at info; other commands use quietLogger.
func (e *env) logger(w io.Writer, level slog.Level) *slog.Logger {
	if e.verbose {
		level = slog.LevelDebug
	}
	return daemon.NewLogger(w, level)
}

// quietLogger is a one-shot command's logger: warnings and errors on stderr.
func (e *env) quietLogger() *slog.Logger { return e.logger(e.stderr, slog.LevelWarn) }

// openLedger opens (and migrates) the state directory's ledger for a
// one-shot command. It works while a daemon runs: SQLite serialises writers.
func (e *env) openLedger(ctx context.Context) (*ledger.Ledger, error) {
	if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
		return nil, failf("create state dir: %v", err)
	}
	return ledger.Open(ctx, daemon.DBPath(e.stateDir), ledger.Options{Logger: e.quietLogger()})
}

// withLedger is the prologue of every command that reads or writes the
// ledger: resolve the environment, open the ledger, close it afterwards.
func withLedger(fn func(c *cli.Context, e *env, l *ledger.Ledger) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		e, err := loadEnv(c)
		if err != nil {
			return err
		}
		l, err := e.openLedger(c.Context)
		if err != nil {
			return err
		}
		defer l.Close()
		return fn(c, e, l)
	}
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON"}
var dryRunFlag = &cli.BoolFlag{Name: "dry-run", Usage: "show what would change without changing anything"}
