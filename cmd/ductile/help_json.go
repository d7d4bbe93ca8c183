package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// helpJSONVersion is the version of help --json's shape: it grows by new
// fields only; a field renamed or removed would raise it.
const helpJSONVersion = 1

// helpDocument is what `ductile help --json` prints: the whole command
// tree, for agents that drive the CLI (docs/cli.md describes each field).
type helpDocument struct {
	Version     int           `json:"version"`
	Name        string        `json:"name"`
	Usage       string        `json:"usage"`
	Description string        `json:"description"`
	GlobalFlags []helpFlag    `json:"global_flags"`
	ExitCodes   []helpExit    `json:"exit_codes"`
	Commands    []helpCommand `json:"commands"`
}

// helpCommand is one command of the tree: a noun (with subcommands) or an
// action (a leaf).
type helpCommand struct {
	// Path is the words that run it after "ductile": "plugin run".
	Path        string        `json:"path"`
	Name        string        `json:"name"`
	Aliases     []string      `json:"aliases"`
	Usage       string        `json:"usage"`
	Description string        `json:"description"`
	ArgsUsage   string        `json:"args_usage"`
	Flags       []helpFlag    `json:"flags"`
	ExitCodes   []helpExit    `json:"exit_codes"`
	Subcommands []helpCommand `json:"subcommands"`
}

// helpFlag is one flag of a command.
type helpFlag struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases"`
	// Type is the flag's value type: bool, string, int, int64, uint,
	// float64, duration, string_slice, ….
	Type string `json:"type"`
	// ValueName is the placeholder its usage names (FILE in "config
	// `FILE`"), "" when it has none.
	ValueName string   `json:"value_name"`
	Default   string   `json:"default"`
	Usage     string   `json:"usage"`
	Required  bool     `json:"required"`
	EnvVars   []string `json:"env_vars"`
}

// helpExit is one exit status and what it means.
type helpExit struct {
	Status  int    `json:"status"`
	Meaning string `json:"meaning"`
}

// exitCodes are the statuses every command may exit with (errors.go maps
// every error to one of them, in exitCode).
var exitCodes = []helpExit{
	{exitOK, "success"},
	{exitFailure, "the command ran and found a problem, or failed: a --json error's code (any but invalid_input) says which kind"},
	{exitUsage, "bad flags or arguments (a --json error's code is invalid_input); nothing was changed"},
}

// commandExitCodes say, by command path, what the common statuses mean for
// the commands that give them a meaning of their own, and any status of
// their own. A test checks that every path is a command of the tree.
var commandExitCodes = map[string][]helpExit{
	"config check":     {{exitFailure, "the config has problems (listed on stdout)"}},
	"ledger verify":    {{exitFailure, "the ledger failed a check (findings on stdout)"}},
	"plugin health":    {{exitFailure, "a plugin is unhealthy"}},
	"plugin new":       {{exitFailure, "DIR/NAME exists already (code conflict): nothing was written"}},
	"plugin run":       {{exitFailure, "the job ended dead, or (with --wait-tree) a job of its tree did not succeed"}},
	"pipeline run":     {{exitFailure, "the pipeline run did not succeed"}},
	"system reload":    {{exitFailure, "the new config was refused; the daemon keeps the old one"}},
	"run create":       {{exitFailure, "with --wait, the run ended other than succeeded"}},
	"run watch":        {{exitFailure, "the run ended other than succeeded"}},
	"pipeline dry-run": {{exitFailure, "with --step, the step ran and did not succeed"}},
	"topic request": {{exitFailure, "the reply came on the failure topic (or TOPIC.timed_out)"},
		{exitRequestTimeout, "no reply within --timeout; the request stays published"}},
	"topic check":   {{exitFailure, "the conversation has a failure reply"}},
	"ledger backup": {{exitFailure, "the copy was not made, or it failed verification (it is not left under --to)"}},
}

// helpJSONPath reports whether args, as normalizeArgs returns them, ask
// for `help [NOUN [ACTION]] --json`, and the words after help.
func helpJSONPath(app *cli.App, args []string) ([]string, bool) {
	if !wantsJSON(app, args) {
		return nil, false
	}
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
		return nil, false
	}
	var words []string
	for _, w := range args[i+1:] {
		if _, _, isFlag := parseFlag(w); !isFlag {
			words = append(words, w)
		}
	}
	return words, true
}

// helpJSON prints the tree of app as JSON; with words, only the command
// they name (a helpCommand).
func helpJSON(app *cli.App, words []string) error {
	doc := describeApp(app)
	if len(words) == 0 {
		return printJSON(app.Writer, doc)
	}
	cmds, path := doc.Commands, ""
	var found *helpCommand
	for _, w := range words {
		found = nil
		for i := range cmds {
			if cmds[i].Name == w || slices.Contains(cmds[i].Aliases, w) {
				found = &cmds[i]
			}
		}
		if found == nil {
			return usagef("unknown command %q%s (see: ductile help --json)", strings.TrimSpace(path+" "+w), "")
		}
		cmds, path = found.Subcommands, found.Path
	}
	return printJSON(app.Writer, found)
}

// describeApp is the help document of app's tree (hidden commands and
// flags left out, as --help leaves them out).
func describeApp(app *cli.App) helpDocument {
	doc := helpDocument{
		Version:     helpJSONVersion,
		Name:        app.Name,
		Usage:       app.Usage,
		Description: app.Description,
		GlobalFlags: describeFlags(app.Flags),
		ExitCodes:   exitCodes,
		Commands:    describeCommands(app.Commands, ""),
	}
	return doc
}

func describeCommands(cmds []*cli.Command, parent string) []helpCommand {
	out := []helpCommand{}
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		path := strings.TrimSpace(parent + " " + c.Name)
		hc := helpCommand{
			Path:        path,
			Name:        c.Name,
			Aliases:     nonNil(c.Aliases),
			Usage:       c.Usage,
			Description: c.Description,
			ArgsUsage:   c.ArgsUsage,
			Flags:       describeFlags(c.Flags),
			ExitCodes:   nonNilExits(commandExitCodes[path]),
			Subcommands: describeCommands(c.Subcommands, path),
		}
		out = append(out, hc)
	}
	return out
}

func describeFlags(flags []cli.Flag) []helpFlag {
	out := []helpFlag{}
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		names := f.Names()
		hf := helpFlag{Name: names[0], Aliases: nonNil(names[1:]), Type: flagType(f), EnvVars: []string{}}
		if d, ok := f.(cli.DocGenerationFlag); ok {
			hf.ValueName, hf.Usage = unquoteUsage(d.GetUsage())
			if d.TakesValue() {
				hf.Default = d.GetDefaultText()
				if s, err := strconv.Unquote(hf.Default); err == nil {
					hf.Default = s // a string flag's default is shown quoted
				}
			} else {
				hf.ValueName = ""
				hf.Default = "false"
			}
			hf.EnvVars = nonNil(d.GetEnvVars())
		}
		if r, ok := f.(cli.RequiredFlag); ok {
			hf.Required = r.IsRequired()
		}
		out = append(out, hf)
	}
	return out
}

// flagType is the value type of f from its Go type: *cli.StringSliceFlag
// is string_slice.
func flagType(f cli.Flag) string {
	name := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", f), "*cli."), "Flag")
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilExits(s []helpExit) []helpExit {
	if s == nil {
		return []helpExit{}
	}
	return s
}

// unquoteUsage is the placeholder a flag's usage names between backquotes
// ("config `FILE`": FILE) and the usage without them, as --help shows it.
func unquoteUsage(usage string) (name, text string) {
	before, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, after, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, before + name + after
}
