package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// wantsJSON reports whether args, as normalizeArgs returns them, give
// --json to the command they run, so that an error found before the
// command runs (a usage error) is printed as JSON too.
func wantsJSON(app *cli.App, args []string) bool {
	takesValue := flagKinds(app.Flags)
	cmds := app.Commands
	for i := 1; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			return false
		}
		if name, hasValue, ok := parseFlag(tok); ok {
			if name == "json" {
				if !hasValue {
					return true
				}
				v, err := strconv.ParseBool(tok[strings.IndexByte(tok, '=')+1:])
				return err == nil && v
			}
			if takesValue[name] && !hasValue {
				i++
			}
			continue
		}
		if c := findCommand(cmds, tok); c != nil {
			maps.Copy(takesValue, flagKinds(c.Flags))
			cmds = c.Subcommands
		}
	}
	return false
}

// normalizeArgs lets flags go anywhere, as users expect: global flags are
// moved in front of the command, and a leaf command's own flags in front of
// its positional arguments (urfave/cli v2 stops parsing flags at the first
// positional, so `plugin run echo --payload {}` would otherwise lose the flag).
// A leaf's flag given before its noun or between noun and action
// (`ductile --json queue`, `job --json list`) moves to the leaf too.
// A literal "--" ends flag handling; what follows stays positional. A word
// that is not a command ends command matching, so urfave reports it.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	globals := flagKinds(app.Flags)
	delete(globals, "help") // --help belongs to the command it follows
	delete(globals, "h")
	// early: flags met before the leaf, for the leaf once it is known.
	var front, path, early, leafFlags, positional, afterDashes, dangling []string
	var leaf, noun *cli.Command
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
			switch {
			case isGlobal:
			case leaf != nil:
				dst = &leafFlags
				takesValue = flagKinds(leaf.Flags)[name]
			case name == "help" || name == "h" || !matching:
				dst = &path // help stays with the command it follows; after an unknown word nothing moves
				takesValue = false
			default:
				dst = &early
				next := ""
				if i+1 < len(rest) {
					next = rest[i+1]
				}
				takesValue = earlyTakesValue(cmds, name, next)
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
			case c == nil && actsItself(noun):
				// ductile run PLUGIN: the noun is the leaf, tok its argument.
				path, leaf = path[:len(path)-1], noun
				positional = append(positional, tok)
			case c == nil:
				matching = false // unknown: urfave reports it; the rest is positional
			case len(c.Subcommands) > 0:
				cmds, noun = c.Subcommands, c
			default:
				leaf = c
			}
			continue
		}
		positional = append(positional, tok)
	}
	if leaf != nil {
		leafFlags = append(early, leafFlags...)
	} else {
		// No action named: after the words, so that an unknown one is
		// what the error is about.
		path = append(path, early...)
	}
	out := append([]string{args[0]}, front...)
	out = append(out, path...)
	out = append(out, leafFlags...)
	if len(dangling) > 0 {
		// The parse fails on the missing value: positionals after the flag
		// would make it an argument (`reset flaky --command`), so leave them.
		return append(out, dangling...)
	}
	if len(afterDashes) > 0 {
		out = append(out, "--") // flags end here: everything after is an argument
		out = append(out, positional...)
		out = append(out, afterDashes[1:]...)
	} else {
		out = append(out, positional...)
	}
	return append(out, dangling...)
}

// actsItself reports whether noun, a command with actions, also acts
// itself on an argument that names none of them (ductile run PLUGIN): it
// says so with its ArgsUsage.
func actsItself(noun *cli.Command) bool {
	return noun != nil && noun.ArgsUsage != ""
}

// earlyTakesValue reports whether flag name, met before the action it
// belongs to, takes a value: whether it does on the commands under cmds
// that define it. Where some take a value and some do not, or none defines
// it (a typo, which the action's parse reports), it takes one unless next
// is a command among cmds or a flag.
func earlyTakesValue(cmds []*cli.Command, name, next string) bool {
	var withValue, without bool
	for _, f := range subtreeFlags(cmds) {
		if slices.Contains(f.Names(), name) {
			withValue = withValue || flagTakesValue(f)
			without = without || !flagTakesValue(f)
		}
	}
	if withValue == without {
		_, _, isFlag := parseFlag(next)
		// "--" ends the flags: it is never a flag's value.
		return findCommand(cmds, next) == nil && !isFlag && next != "--"
	}
	return withValue
}

// subtreeFlags is the flags of cmds and of every command under them.
func subtreeFlags(cmds []*cli.Command) []cli.Flag {
	var flags []cli.Flag
	for _, c := range cmds {
		flags = append(flags, c.Flags...)
		flags = append(flags, subtreeFlags(c.Subcommands)...)
	}
	return flags
}

// flagKinds maps every name and alias of flags to whether it takes a value.
func flagKinds(flags []cli.Flag) map[string]bool {
	m := map[string]bool{"help": false, "h": false}
	for _, f := range flags {
		for _, n := range f.Names() {
			m[n] = flagTakesValue(f)
		}
	}
	return m
}

// flagTakesValue reports whether flag f takes a value (every flag but a bool).
func flagTakesValue(f cli.Flag) bool {
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
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
