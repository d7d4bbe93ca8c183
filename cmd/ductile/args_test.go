package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// argsApp is the real app plus a leaf that takes positional arguments and
// whose flags this test controls, shaped like `plugin run NAME --payload`.
func argsApp() *cli.App {
	app := newApp(io.Discard, io.Discard)
	app.Commands = append(app.Commands, &cli.Command{
		Name: "widget",
		Subcommands: []*cli.Command{{
			Name: "run",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "payload", Aliases: []string{"p"}},
				&cli.BoolFlag{Name: "dry-run"},
			},
		}, {
			Name:  "check",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "payload"}}, // a bool here, a value on run
		}},
	})
	return app
}

func TestNormalizeArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string // split on spaces; "" is no arguments at all
		want string
	}{
		{"no arguments", "", ""},
		{"program only", "ductile", "ductile"},
		{"already in order", "ductile --state-dir X ledger tail --json", "ductile --state-dir X ledger tail --json"},

		// Global flags anywhere move in front of the command.
		{"global after the leaf", "ductile ledger tail --state-dir X", "ductile --state-dir X ledger tail"},
		{"global between noun and verb", "ductile ledger --state-dir X tail", "ductile --state-dir X ledger tail"},
		{"global among leaf flags", "ductile ledger tail -n 3 --state-dir X --json", "ductile --state-dir X ledger tail -n 3 --json"},
		{"global with =", "ductile ledger tail --json --state-dir=X", "ductile --state-dir=X ledger tail --json"},
		{"short global", "ductile ledger stats -c cfg.yaml", "ductile -c cfg.yaml ledger stats"},
		{"single-dash long global", "ductile ledger stats -state-dir X", "ductile -state-dir X ledger stats"},
		{"globals keep their order", "ductile ledger -c a.yaml tail --state-dir X -v", "ductile -c a.yaml --state-dir X -v ledger tail"},
		{"global value that names a command", "ductile ledger tail --state-dir ledger", "ductile --state-dir ledger ledger tail"},

		// Bool flags never take the next token as their value.
		{"bool global before the noun", "ductile -v ledger tail", "ductile -v ledger tail"},
		{"bool global after the leaf", "ductile ledger tail --verbose -n 3", "ductile --verbose ledger tail -n 3"},
		{"bool leaf flag before a positional", "ductile widget run --dry-run echo", "ductile widget run --dry-run echo"},
		{"bool leaf flag after a positional", "ductile widget run echo --dry-run extra", "ductile widget run --dry-run echo extra"},
		{"bool leaf alias", "ductile ledger tail -f --json", "ductile ledger tail -f --json"},

		// A leaf's own flags move in front of its positionals, with their values.
		{"leaf flag after a positional", "ductile widget run echo --payload {}", "ductile widget run --payload {} echo"},
		{"leaf alias after a positional", "ductile widget run echo -p {}", "ductile widget run -p {} echo"},
		{"leaf flag with = after a positional", "ductile widget run echo --payload={}", "ductile widget run --payload={} echo"},
		{"leaf value that names a command", "ductile ledger tail --stream ledger --type tail", "ductile ledger tail --stream ledger --type tail"},
		{"leaf value that looks like a flag", "ductile ledger tail --type --json", "ductile ledger tail --type --json"},
		{"positionals keep their order", "ductile widget run a --dry-run b -p x c", "ductile widget run --dry-run -p x a b c"},
		{"everything at once", "ductile widget -v run echo --payload {} --state-dir=X x", "ductile -v --state-dir=X widget run --payload {} echo x"},

		// "--" ends flag handling: it moves ahead of the positionals, so urfave
		// stops parsing flags there and what follows stays positional, in order.
		{"-- keeps later flags positional", "ductile widget run echo -- --payload x", "ductile widget run -- echo --payload x"},
		{"-- keeps later globals positional", "ductile widget run echo --state-dir X -- -v --state-dir Y", "ductile --state-dir X widget run -- echo -v --state-dir Y"},
		{"flags before -- still move", "ductile widget run echo -p x -- y", "ductile widget run -p x -- echo y"},
		{"leaf flag missing its value after a positional", "ductile widget run echo --payload", "ductile widget run --payload"},
		{"leaf flag missing its value, others kept", "ductile widget run echo --dry-run -p", "ductile widget run --dry-run -p"},
		{"a lone - is a positional", "ductile widget run - --dry-run", "ductile widget run --dry-run -"},

		// A leaf's flag before its noun or between noun and action moves to
		// the leaf, with its value if the leaf's flag takes one.
		{"leaf flag before the noun", "ductile --json ledger tail", "ductile ledger tail --json"},
		{"leaf flag between noun and action", "ductile ledger --json tail -n 3", "ductile ledger tail --json -n 3"},
		{"leaf flag before the noun, with globals", "ductile --json --state-dir X ledger -v tail", "ductile --state-dir X -v ledger tail --json"},
		{"early flag with its value", "ductile -n 3 ledger tail", "ductile ledger tail -n 3"},
		{"early flag whose value names a command", "ductile ledger --stream tail tail", "ductile ledger tail --stream tail"},
		{"early flag with =", "ductile ledger --stream=x tail", "ductile ledger tail --stream=x"},
		{"early flags before the positionals", "ductile widget --payload {} run echo --dry-run", "ductile widget run --payload {} --dry-run echo"},
		{"early flag of two kinds, a value follows", "ductile widget --payload {} run echo", "ductile widget run --payload {} echo"},
		{"early flag of two kinds, a command follows", "ductile widget --payload check", "ductile widget check --payload"},
		{"early flag missing its value", "ductile ledger --stream", "ductile ledger --stream"},
		{"early flag and no action", "ductile ledger --json", "ductile ledger --json"},
		{"early flag before an unknown word", "ductile --json bogus", "ductile bogus --json"},
		{"early flag before an unknown action", "ductile ledger --json bogus tail", "ductile ledger bogus --json tail"},
		{"unknown early flag", "ductile --bogus ledger tail", "ductile ledger tail --bogus"},
		{"unknown early flag before a word", "ductile ledger --bogus 3 tail", "ductile ledger tail --bogus 3"},
		{"unknown early flag before a flag", "ductile --bogus --state-dir X", "ductile --state-dir X --bogus"},

		// Help flags stay with the command they follow.
		{"help on the app", "ductile --help", "ductile --help"},
		{"help on a noun", "ductile ledger --help", "ductile ledger --help"},
		{"help on a leaf", "ductile ledger tail -h", "ductile ledger tail -h"},

		// Unknown commands are left alone, as positionals, for urfave/cli to
		// report; a command name after an unknown word is not a command.
		{"unknown command", "ductile bogus", "ductile bogus"},
		{"unknown command with a global", "ductile bogus --state-dir X", "ductile --state-dir X bogus"},
		{"unknown verb", "ductile ledger bogus", "ductile ledger bogus"},
		{"unknown verb then a real one", "ductile ledger bogus tail", "ductile ledger bogus tail"},
		{"unknown noun then a real command", "ductile bogus ledger tail", "ductile bogus ledger tail"},
		{"known leaf then its name again", "ductile ledger tail tail", "ductile ledger tail tail"},
		{"unknown flag stays with the leaf", "ductile ledger tail --bogus 3", "ductile ledger tail --bogus 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := normalizeArgs(argsApp(), fields(tc.in))
			require.Equal(t, fields(tc.want), got, "normalizeArgs(%q)", tc.in)
		})
	}
}

// fields splits on single spaces; "" is an empty (non-nil) slice.
func fields(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, " ")
}

// TestNormalizeArgsKeepsTheInput checks the caller's slice is not modified.
func TestNormalizeArgsKeepsTheInput(t *testing.T) {
	t.Parallel()
	in := fields("ductile widget run echo --payload {} --state-dir X")
	keep := append([]string(nil), in...)
	_ = normalizeArgs(argsApp(), in)
	require.Equal(t, keep, in)
}

// TestNormalizedArgsParse runs reordered lines through urfave/cli with a
// recording action, proving the flags reach the leaf and the positionals
// survive.
func TestNormalizedArgsParse(t *testing.T) {
	t.Parallel()
	type parsed struct {
		StateDir, Payload string
		DryRun, Verbose   bool
		Args              []string
	}
	for _, tc := range []struct {
		name string
		in   string
		want parsed
	}{
		{"flags everywhere", "ductile widget run echo --payload {} extra --state-dir X --dry-run -v",
			parsed{StateDir: "X", Payload: "{}", DryRun: true, Verbose: true, Args: []string{"echo", "extra"}}},
		{"leaf flags before the noun and the action", "ductile --dry-run widget -p x run echo",
			parsed{Payload: "x", DryRun: true, Args: []string{"echo"}}},
		{"-- with no positional before it", "ductile widget run --dry-run -- --not-a-flag -v",
			parsed{DryRun: true, Args: []string{"--not-a-flag", "-v"}}},
		{"-- after a positional", "ductile widget run echo -p x -- --not-a-flag",
			parsed{Payload: "x", Args: []string{"echo", "--not-a-flag"}}},
	} {
		// Not in parallel: urfave/cli v2 writes into its package-level
		// HelpFlag as each app parses, a data race between apps.
		t.Run(tc.name, func(t *testing.T) {
			app := argsApp()
			var got parsed
			run := app.Commands[len(app.Commands)-1].Subcommands[0]
			run.Action = func(c *cli.Context) error {
				got = parsed{
					StateDir: c.String("state-dir"), Payload: c.String("payload"),
					DryRun: c.Bool("dry-run"), Verbose: c.Bool("verbose"), Args: c.Args().Slice(),
				}
				return nil
			}
			require.NoError(t, app.Run(normalizeArgs(app, fields(tc.in))))
			require.Equal(t, tc.want, got)
		})
	}
}

// TestNormalizeArgsOfANounThatActs: ductile run PLUGIN [COMMAND] is run's
// own action (a word that names none of its actions), so run's flags move in
// front of the plugin as a leaf's do; its actions are reached as usual.
func TestNormalizeArgsOfANounThatActs(t *testing.T) {
	t.Parallel()
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct{ in, want string }{
		{"ductile run echo poll --json --task-id t", "ductile run --json --task-id t echo poll"},
		{"ductile --json run echo", "ductile run --json echo"},
		{"ductile run echo --state-dir X --args {}", "ductile --state-dir X run --args {} echo"},
		{"ductile run create echo --args {} --dry-run", "ductile run create --args {} --dry-run echo"},
		{"ductile run list --json", "ductile run list --json"},
		{"ductile run watch ID --json", "ductile run watch --json ID"},
		{"ductile run --help", "ductile run --help"},
	} {
		require.Equal(t, fields(tc.want), normalizeArgs(app, fields(tc.in)), "normalizeArgs(%q)", tc.in)
	}
}

// TestOnlyRunActsItself: the one noun that acts on a word naming none of
// its actions is run; any other noun reports the word as unknown.
func TestOnlyRunActsItself(t *testing.T) {
	t.Parallel()
	var acting []string
	var walk func(cmds []*cli.Command, path string)
	walk = func(cmds []*cli.Command, path string) {
		for _, c := range cmds {
			if len(c.Subcommands) > 0 {
				if actsItself(c) {
					acting = append(acting, path+c.Name)
				}
				walk(c.Subcommands, path+c.Name+" ")
			}
		}
	}
	walk(newApp(io.Discard, io.Discard).Commands, "")
	require.Equal(t, []string{"run"}, acting)
}
