package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/errcode"
)

// finishTree gives every command the same handling of usage errors (exit 2,
// a one-line message, no help dump on stdout), makes an unknown subcommand a
// usage error, rejects positional arguments where a command takes none, and
// requires exactly one where its ArgsUsage names one (e.g. "JOB_ID"). The
// check runs before the action, so bad input touches nothing.
func finishTree(cmds []*cli.Command, parent string, globals []cli.Flag) {
	for _, c := range cmds {
		name := strings.TrimSpace(parent + " " + c.Name)
		// A typo is compared with the flags of the command and of its
		// actions (a noun's flag is one of an action given early).
		flags := append(slices.Clip(globals), subtreeFlags([]*cli.Command{c})...)
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return parseError(err, name, flags)
		}
		if len(c.Subcommands) > 0 {
			finishTree(c.Subcommands, name, globals)
			if c.Action != nil {
				continue // a noun that acts itself on an argument no action names (ductile run PLUGIN)
			}
			c.Action = func(ctx *cli.Context) error {
				if ctx.NArg() > 0 {
					return usagef("unknown command %q for %q%s (see: ductile %s --help)", ctx.Args().First(), name, suggestCommand(ctx.Args().First(), ctx.Command.Subcommands), name)
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

// parseError is the usage error for err, urfave/cli's failure to parse the
// flags of command name ("" for the app), whose flags (with the globals,
// given anywhere) are flags: an unknown flag is named as typed, with the
// nearest known one (--dryrun: did you mean --dry-run?).
func parseError(err error, name string, flags []cli.Flag) error {
	see := "see: " + strings.TrimSpace("ductile "+name) + " --help"
	// The flag package says it only in words (it has no typed error).
	typed, unknown := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !unknown {
		return withHint(errcode.InvalidInput, err, see)
	}
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	names = append(names, "help")
	msg := "unknown flag " + dashed(typed)
	if s := config.Suggest(typed, names); s != "" && len(typed) > 1 {
		msg += ": did you mean " + dashed(s) + "?"
	}
	return hintf(errcode.InvalidInput, see, "%s", msg)
}

// dashed is flag name as typed on a line: -v, --json.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// suggestCommand is ": did you mean X?" for the command in cmds closest to
// word, or "".
func suggestCommand(word string, cmds []*cli.Command) string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	if s := config.Suggest(word, names); s != "" {
		return fmt.Sprintf(": did you mean %s?", s)
	}
	return ""
}

// helpArgs turns "ductile help NOUN ACTION", as normalizeArgs returns it,
// into "ductile NOUN ACTION --help", so that help shows what --help shows;
// "ductile help" is "ductile --help". A word that is not a command there
// is a usage error. Other arguments are returned unchanged.
func helpArgs(app *cli.App, args []string) ([]string, error) {
	globals := flagKinds(app.Flags)
	i := 1
	for ; i < len(args); i++ {
		name, hasValue, ok := parseFlag(args[i])
		if !ok {
			break
		}
		if globals[name] && !hasValue {
			i++
		}
	}
	if i >= len(args) || args[i] != "help" {
		return args, nil
	}
	out := slices.Clone(args[:i])
	cmds, path := app.Commands, ""
	for _, word := range args[i+1:] {
		if _, _, isFlag := parseFlag(word); isFlag {
			continue
		}
		c := findCommand(cmds, word)
		switch {
		case c == nil && path == "":
			return nil, usagef("unknown command %q%s (see: ductile --help)", word, suggestCommand(word, cmds))
		case c == nil:
			return nil, usagef("unknown command %q for %q%s (see: ductile %s --help)", word, path, suggestCommand(word, cmds), path)
		}
		out = append(out, word)
		cmds, path = c.Subcommands, strings.TrimSpace(path+" "+c.Name)
	}
	return append(out, "--help"), nil
}

// argSources names, for an argument a command requires, where to find a
// valid one: what a usage error about it points to (else the command's --help).
var argSources = map[string]string{
	"JOB_ID": "ductile job list",
	"PLUGIN": "ductile plugin list",
}
