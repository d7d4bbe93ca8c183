package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
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

// errorCode is the stable, machine-readable kind of an error: what --json
// prints as error.code. It decides the exit status: usage exits 2, every
// other code 1. Scripts may rely on these names; add codes, never rename.
type errorCode string

const (
	codeUsage         errorCode = "usage"          // bad flags or arguments
	codeNotFound      errorCode = "not_found"      // a job, plugin or file named does not exist
	codeConflict      errorCode = "conflict"       // the state does not allow it now: a finished job, a held lock, an existing file
	codeInvalidConfig errorCode = "invalid_config" // the config file does not load
	codeTimeout       errorCode = "timeout"        // gave up waiting (--timeout)
	codeCanceled      errorCode = "canceled"       // interrupted by SIGINT or SIGTERM
	codeArchived      errorCode = "archived"       // a moment whose events an archive moved out of the ledger
	codeError         errorCode = "error"          // any other failure
)

// exitStatus is the process exit status of an error of this code.
func (c errorCode) exitStatus() int {
	if c == codeUsage {
		return exitUsage
	}
	return exitFailure
}

// exitError is an error with its code, what went wrong, and what to do
// next. Build one with the constructors below so that every error has a
// code; a plain error gets one from classify.
type exitError struct {
	code errorCode
	msg  string // "" when the command has reported already (silent)
	hint string // what to do next, when msg does not say it
}

func (e *exitError) Error() string { return e.msg }

// errorf makes an error of code with a message saying what to do next.
func errorf(code errorCode, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// failf makes an error that exits 1 (code "error").
func failf(format string, args ...any) error { return errorf(codeError, format, args...) }

// usagef makes an error that exits 2 (code "usage").
func usagef(format string, args ...any) error { return errorf(codeUsage, format, args...) }

// notFoundf makes an error for a job, plugin or file that does not exist.
func notFoundf(format string, args ...any) error { return errorf(codeNotFound, format, args...) }

// conflictf makes an error for a request the current state refuses.
func conflictf(format string, args ...any) error { return errorf(codeConflict, format, args...) }

// hintf makes an error of code whose message says what is wrong and whose
// hint says what to do next (a separate field of a --json error).
func hintf(code errorCode, hint, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...), hint: hint}
}

// withHint makes an error of code whose message is err's, with hint.
func withHint(code errorCode, err error, hint string) error {
	return &exitError{code: code, msg: err.Error(), hint: hint}
}

// silent exits with status without printing anything more (the command
// has already reported, e.g. verify's findings).
func silent(status int) error {
	if status == exitUsage {
		return &exitError{code: codeUsage}
	}
	return &exitError{code: codeError}
}

// classify gives a plain error (one not built by the constructors above)
// its code, from the sentinels it wraps.
func classify(err error) errorCode {
	var ve *config.ValidationError
	switch {
	case errors.Is(err, context.Canceled):
		return codeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return codeTimeout
	case errors.As(err, &ve):
		return codeInvalidConfig
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, commands.ErrJobNotFound):
		return codeNotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, daemon.ErrLocked),
		errors.Is(err, ledger.ErrVersionConflict), errors.Is(err, commands.ErrInvalidTransition):
		return codeConflict
	}
	return codeError
}

// errAnswered ends a run that has answered in full before any command ran
// (--version): exit 0, nothing more printed.
var errAnswered = errors.New("answered")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	args = normalizeArgs(app, args)
	asJSON := wantsJSON(app, args)
	args, err := helpArgs(app, args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if errors.Is(err, errAnswered) {
		return exitOK
	}
	return exitCode(err, stderr, asJSON)
}

// exitCode reports err on stderr, as one line of JSON when the command was
// given --json ({"error":{"code":…,"message":…,"hint":…}}), and returns
// the exit status. An interrupt is reported only in JSON.
func exitCode(err error, stderr io.Writer, asJSON bool) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: classify(err), msg: err.Error()}
		if ee.code == codeCanceled {
			ee.msg = "interrupted"
			if !asJSON {
				ee.msg = ""
			}
		}
	}
	switch {
	case ee.msg == "":
	case asJSON:
		type body struct {
			Code    errorCode `json:"code"`
			Message string    `json:"message"`
			Hint    string    `json:"hint,omitempty"`
		}
		b, _ := json.Marshal(struct {
			Error body `json:"error"`
		}{body{ee.code, ee.msg, ee.hint}})
		fmt.Fprintf(stderr, "%s\n", b)
	case ee.hint == "":
		fmt.Fprintf(stderr, "ductile: %s\n", ee.msg)
	case !strings.Contains(ee.msg, "\n"):
		fmt.Fprintf(stderr, "ductile: %s (%s)\n", ee.msg, ee.hint)
	default:
		// A message of several lines (a config's problems): the hint on
		// a line of its own after them.
		fmt.Fprintf(stderr, "ductile: %s\n(%s)\n", ee.msg, ee.hint)
	}
	return ee.code.exitStatus()
}

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
		Commands:             []*cli.Command{systemCommand(), ledgerCommand(), pluginCommand(), jobCommand(), queueCommand(), configCommand(), pipelineCommand(), benchCommand()},
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
	finishTree(app.Commands, "", globalFlags)
	return app
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
		return findCommand(cmds, next) == nil && !isFlag
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
		return withHint(codeUsage, err, see)
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
	return hintf(codeUsage, see, "%s", msg)
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

// versionText describes this build from its Go build info: the module
// version, the VCS revision and its time, and whether the working tree had
// changes that are not committed.
func versionText(info *debug.BuildInfo, ok bool) string {
	if !ok {
		return "ductile (unknown version: built without module support)\n"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ductile %s\n", info.Main.Version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteByte('\n')
	} else {
		b.WriteString("revision unknown (built outside a git checkout, or with -buildvcs=false)\n")
	}
	fmt.Fprintf(&b, "%s %s/%s\n", info.GoVersion, settings["GOOS"], settings["GOARCH"])
	return b.String()
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

// env is what a command needs to know about where it runs.
type env struct {
	stdout, stderr io.Writer
	cfg            *config.Config
	stateDir       string
	verbose        bool
	logFormat      string // logAuto, logJSON or logText
}

// The values of --log-format.
const (
	logAuto = "auto" // text when the log goes to a terminal, else JSON
	logJSON = "json"
	logText = "text"
)

// loadEnv loads the config (--config, else the built-in defaults) and
// resolves the state directory from it (see newEnv). A ${VAR} whose
// variable is not set in this shell does not stop it (loadEnvWith).
func loadEnv(c *cli.Context) (*env, error) { return loadEnvWith(c, config.LoadDeferred) }

// loadEnvWith is loadEnv with the config loaded by load: config.LoadDeferred
// for a command that uses few of its values (a ${VAR} whose variable is not
// set in this shell is left for whatever uses it to refuse:
// config.Config.UnsetFor), config.Load for the daemon, which uses them all.
func loadEnvWith(c *cli.Context, load func(string) (*config.Config, error)) (*env, error) {
	// Global flags live on the root; c.String finds them through the lineage.
	path := c.String("config")
	if path == "" {
		return newEnv(c, config.Default())
	}
	cfg, err := load(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, withHint(codeNotFound, err, "check the path given to --config (or $DUCTILE_CONFIG); without either, the built-in defaults apply")
		}
		return nil, withHint(codeInvalidConfig, err, "check the file with: ductile config check --config "+path)
	}
	return newEnv(c, cfg)
}

// newEnv is the environment for an already loaded config. The state
// directory is --state-dir, then $DUCTILE_STATE_DIR (both arrive through the
// flag), then the config's state_dir, then the per-user default.
func newEnv(c *cli.Context, cfg *config.Config) (*env, error) {
	e := &env{
		stdout:    c.App.Writer,
		stderr:    c.App.ErrWriter,
		cfg:       cfg,
		verbose:   c.Bool("verbose"),
		logFormat: c.String("log-format"),
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

// logger writes to w at level, or at debug with --verbose: readable lines
// when w is a terminal (or with --log-format text), else JSON lines. The
// daemon logs to stdout at info; other commands use quietLogger.
func (e *env) logger(w io.Writer, level slog.Level) *slog.Logger {
	if e.verbose {
		level = slog.LevelDebug
	}
	if e.logFormat == logText || e.logFormat != logJSON && daemon.IsTerminal(w) {
		return daemon.NewTextLogger(w, level)
	}
	return daemon.NewLogger(w, level)
}

// quietLogger is a one-shot command's logger: warnings and errors on stderr.
func (e *env) quietLogger() *slog.Logger { return e.logger(e.stderr, slog.LevelWarn) }

// openLedger opens (creating and migrating if needed) the state directory's
// ledger for a one-shot command that writes. It works while a daemon runs:
// SQLite serialises writers.
func (e *env) openLedger(ctx context.Context) (*ledger.Ledger, error) {
	if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
		return nil, failf("create state dir: %v", err)
	}
	l, err := ledger.Open(ctx, daemon.DBPath(e.stateDir), ledger.Options{Logger: e.quietLogger()})
	return l, ledgerError(err)
}

// allowDamagedName is the flag that lets system start open a ledger that a
// writer would otherwise refuse (ledger.ErrDamaged).
const allowDamagedName = "allow-damaged-ledger"

// The shared flags are made anew for each command: urfave/cli writes into
// a flag as it parses, so one value shared by several apps (tests run them
// in parallel) would be a data race.

func allowDamagedFlag() *cli.BoolFlag {
	return &cli.BoolFlag{
		Name: allowDamagedName,
		Usage: "start even if events were removed from the end of the ledger, or its chain is broken " +
			"after the last recorded head: the damage is logged and accepted, the projections are rebuilt " +
			"from the log as it is, and its head is recorded anew",
	}
}

// ledgerError says what to do about an error opening the ledger to write:
// a damaged ledger is refused until someone accepts the damage.
func ledgerError(err error) error {
	var damaged *ledger.DamagedError
	if errors.As(err, &damaged) {
		return failf("%v\n(details: ductile ledger verify; restore the ledger from a backup, "+
			"or accept the damage and go on with: ductile system start --%s)", err, allowDamagedName)
	}
	return err
}

// openExistingLedger is openLedger for a command that changes what is
// already there (a job's cancel or retry, a replay in place): on a missing
// ledger it creates nothing and says where it looked.
func (e *env) openExistingLedger(ctx context.Context) (*ledger.Ledger, error) {
	if _, err := os.Stat(daemon.DBPath(e.stateDir)); errors.Is(err, fs.ErrNotExist) {
		return nil, e.noLedger()
	}
	return e.openLedger(ctx)
}

// noLedger is the error for a state directory with no ledger in it.
func (e *env) noLedger() error {
	return notFoundf("no ledger at %s: nothing has run on the state directory %s yet "+
		"(check --state-dir, $DUCTILE_STATE_DIR and the config's state_dir; ductile system start creates it)",
		daemon.DBPath(e.stateDir), e.stateDir)
}

// readLedger opens the state directory's ledger read-only, for a command
// that only reads: it creates, migrates and writes nothing, so it works on
// a read-only mount or file. A missing ledger, or one whose schema is
// behind this binary, is an error that says where it looked and what to do.
func (e *env) readLedger(ctx context.Context) (*ledger.Ledger, error) {
	path := daemon.DBPath(e.stateDir)
	l, err := ledger.Open(ctx, path, ledger.Options{ReadOnly: true, Logger: e.quietLogger()})
	var schema *ledger.SchemaError
	switch {
	case errors.Is(err, ledger.ErrNoLedger):
		return nil, e.noLedger()
	case errors.As(err, &schema):
		return nil, failf("%v: run ductile system migrate --state-dir %s (or start the daemon, which migrates), then this again", err, e.stateDir)
	}
	return l, err
}

// withExistingLedger is the prologue of every command that changes what is
// in the ledger: resolve the environment, open the ledger
// (openExistingLedger), close it afterwards.
func withExistingLedger(fn func(c *cli.Context, e *env, l *ledger.Ledger) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		e, err := loadEnv(c)
		if err != nil {
			return err
		}
		l, err := e.openExistingLedger(c.Context)
		if err != nil {
			return err
		}
		defer l.Close()
		return fn(c, e, l)
	}
}

// withReadLedger is withExistingLedger for a command that only reads: the ledger is
// opened read-only (readLedger). With the state directory given (--state-dir or
// $DUCTILE_STATE_DIR), a config file that does not load only warns: what is in the
// ledger can be read without it, and a broken file is when an operator needs to.
func withReadLedger(fn func(c *cli.Context, e *env, l *ledger.Ledger) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		e, cfgErr := loadEnv(c)
		if cfgErr != nil {
			var err error
			if e, err = daemonEnv(c); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "warning: config not loaded (%v); reading the ledger of %s without it\n", cfgErr, e.stateDir)
		}
		l, err := e.readLedger(c.Context)
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

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON"}
}

func dryRunFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "dry-run", Usage: "show what would change without changing anything"}
}
