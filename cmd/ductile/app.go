package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"

	"github.com/urfave/cli/v2"
)

// errAnswered ends a run that has answered in full before any command ran
// (--version): exit 0, nothing more printed.
var errAnswered = errors.New("answered")

// run runs the command line args and returns the process exit status;
// errors are reported on stderr by exitCode.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	args = normalizeArgs(app, args)
	asJSON := wantsJSON(app, args)
	if words, ok := helpJSONPath(app, args); ok {
		return exitCode(helpJSON(app, words), stderr, true)
	}
	args, err := helpArgs(app, args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if errors.Is(err, errAnswered) {
		return exitOK
	}
	return exitCode(err, stderr, asJSON)
}

// newApp is the NOUN ACTION command tree with the global flags, writing
// to stdout and stderr.
func newApp(stdout, stderr io.Writer) *cli.App {
	globalFlags := []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"DUCTILE_CONFIG"}, Usage: "config `FILE` (default: none, built-in defaults)"},
		&cli.StringFlag{Name: "state-dir", EnvVars: []string{"DUCTILE_STATE_DIR"}, Usage: "state `DIR` holding the ledger and lock (default: config's state_dir, else $XDG_STATE_HOME/ductile)"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "log debug detail to stderr"},
		&cli.StringFlag{Name: "log-format", Value: logAuto, Usage: "log lines as `FORMAT`: auto (readable text on a terminal, else JSON), json or text"},
		&cli.BoolFlag{Name: "version", Usage: "print the version (module version, VCS revision and time) and exit"},
	}
	app := &cli.App{
		Name:  "ductile",
		Usage: "run personal automations unattended",
		Description: "Ductile keeps one durable queue of jobs, runs plugins as subprocesses and records\n" +
			"every step in an event-sourced SQLite ledger. Commands are NOUN ACTION.\n" +
			"Flags may appear anywhere on the line: global ones (--config, --state-dir, --verbose, --log-format)\n" +
			"and a command's own (ductile --json queue, ductile job --json list, ductile job list --json).\n" +
			"Help on a command: ductile help NOUN [ACTION], or ductile NOUN [ACTION] --help.\n" +
			"With --json, an error is one JSON line on stderr: {\"error\":{\"code\":…,\"message\":…,\"hint\":…}}.",
		Flags: globalFlags,
		Before: func(c *cli.Context) error {
			if f := c.String("log-format"); !slices.Contains([]string{logAuto, logJSON, logText}, f) {
				return usagef("--log-format must be auto, json or text, got %q", f)
			}
			if c.Bool("version") {
				fmt.Fprint(c.App.Writer, versionText(debug.ReadBuildInfo()))
				return errAnswered
			}
			return nil
		},
		Commands:             []*cli.Command{systemCommand(), ledgerCommand(), pluginCommand(), jobCommand(), runCommand(), queueCommand(), workerRunCommand(), topicCommand(), configCommand(), pipelineCommand(), benchCommand(), builtinCommand(), mcpCommand()},
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		ExitErrHandler:       func(*cli.Context, error) {}, // exitCode reports errors
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return parseError(err, "", globalFlags)
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("unknown command %q%s (see: ductile --help)", c.Args().First(), suggestCommand(c.Args().First(), c.App.Commands))
			}
			return cli.ShowAppHelp(c)
		},
	}
	app.Commands = append(app.Commands, completionCommand())
	finishTree(app.Commands, "", globalFlags)
	return app
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
