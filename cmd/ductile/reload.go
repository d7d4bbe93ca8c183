package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/views"
)

func systemReloadCommand() *cli.Command {
	return &cli.Command{
		Name:  "reload",
		Usage: "make the running daemon read its config file again (as SIGHUP does)",
		Description: "The daemon reloads the file it was started with (not --config), discovers plugins\n" +
			"again and checks them as ductile config check does. A config with any error changes\n" +
			"nothing: the daemon keeps the old one (its routes, schedules and webhooks too), and\n" +
			"this command prints every error and exits 1. A config without errors runs at once:\n" +
			"routes, schedules, plugin settings and discovery change; running jobs finish with the\n" +
			"settings they started with; queued jobs of a plugin the new config removes or disables\n" +
			"are canceled with the reason. Its warnings (integrity, undeclared keys…) are printed.\n" +
			"--force applies a config whose only errors are of the plugins (a plugin skipped, a\n" +
			"route, webhook or pipeline naming one that is not there) anyway, each error printed as\n" +
			"a warning; the file's own errors (YAML, keys, values, .checksums) are never forced.\n" +
			"--dry-run checks the file as the daemon would and shows what would change.",
		Flags: []cli.Flag{jsonFlag(), dryRunFlag(),
			&cli.BoolFlag{Name: "force", Usage: "apply the config even if plugins it names are skipped or missing (never past the file's own errors)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "how long to wait for the daemon's answer"}},
		Action: systemReload,
	}
}

// reloadOutput is what system reload prints with --json.
type reloadOutput struct {
	DryRun bool   `json:"dry_run,omitempty"`
	OK     bool   `json:"ok"`
	PID    int    `json:"pid"`
	Config string `json:"config"`
	Hash   string `json:"hash,omitempty"`
	Error  string `json:"error,omitempty"`
	// Errors are every problem of the config: why it was refused, or, with
	// Forced, what --force applied it past.
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
	Forced   bool     `json:"forced,omitempty"`
	// Forceable: refused, but --force would apply it.
	Forceable bool                   `json:"forceable,omitempty"`
	Changes   []events.SettingChange `json:"changes"`
	// Added, Removed name the plugins the reload starts and stops running.
	Added   []string `json:"plugins_added"`
	Removed []string `json:"plugins_removed"`
	// Skipped are the pipelines the daemon does not run after the reload.
	Skipped []events.SkippedPipeline `json:"skipped_pipelines,omitempty"`
	// Ends counts the queued jobs the reload cancels, by plugin (dry run).
	Ends map[string]int `json:"queued_jobs_to_cancel,omitempty"`
}

func systemReload(c *cli.Context) error {
	if c.Duration("timeout") <= 0 {
		return usagef("--timeout must be positive, e.g. 30s: how long to wait for the daemon's answer")
	}
	e, err := daemonEnv(c)
	if err != nil {
		return err
	}
	ctx := c.Context
	h, err := daemon.Holder(e.stateDir)
	if err != nil {
		return err
	}
	if !h.Daemon() {
		return hintf(errcode.Conflict, "start it with: ductile system start (a start reads the config)",
			"no daemon is running on %s: there is nothing to reload", e.stateDir)
	}
	open := e.openExistingLedger // the request is recorded
	if c.Bool("dry-run") {
		open = e.readLedger
	}
	l, err := open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	waitCtx, cancel := context.WithTimeout(ctx, c.Duration("timeout"))
	defer cancel()
	applied, err := daemon.WaitApplied(waitCtx, e.stateDir, l, h.PID)
	if err != nil {
		return waitError(err, h.PID, c.Duration("timeout"))
	}
	out := reloadOutput{PID: h.PID, Config: orDefaults(applied.Settings.Source), Errors: []string{}, Warnings: []string{},
		Changes: []events.SettingChange{}, Added: []string{}, Removed: []string{}}
	if c.String("config") != "" && mustAbsPath(c.String("config")) != applied.Settings.Source {
		fmt.Fprintf(e.stderr, "note: the daemon reloads %s, not --config %s\n", out.Config, c.String("config"))
	}
	if c.Bool("dry-run") {
		return reloadDryRun(c, e, l, applied, out)
	}

	requested, err := commands.RequestReload(ctx, l, commands.ReloadRequest{PID: h.PID, Force: c.Bool("force")})
	if err != nil {
		return err
	}
	if err := syscall.Kill(h.PID, syscall.SIGHUP); err != nil {
		return failf("signal the daemon (pid %d): %v", h.PID, err)
	}
	a, err := daemon.WaitReload(waitCtx, e.stateDir, l, h.PID, requested)
	var failed *daemon.ReloadFailedError
	switch {
	case errors.As(err, &failed):
		out.Error, out.Errors, out.Forceable = failed.Error(), failed.Errors, failed.Forceable
		if len(out.Errors) == 0 {
			out.Errors = strings.Split(failed.Error(), "\n")
		}
		return reloadRefused(c, e, out, fmt.Sprintf("the daemon (pid %d) kept its config", h.PID))
	case err != nil:
		return waitError(err, h.PID, c.Duration("timeout"))
	}
	out.OK, out.Hash, out.Changes = true, a.Settings.Hash, orEmpty(a.Changes)
	out.Errors, out.Warnings, out.Forced = orEmpty(a.Errors), orEmpty(a.Warnings), len(a.Errors) > 0
	out.Added, out.Removed = pluginChanges(applied, a)
	out.Skipped = a.SkippedPipelines
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "reloaded %s (daemon pid %d): %s\n", out.Config, h.PID, describeChanges(out))
	printChanges(e.stdout, out.Changes)
	printReloadWarnings(e.stderr, out)
	return nil
}

// reloadRefused reports a reload refused (kept says what stays) with
// every error of the config, and exits 1.
func reloadRefused(c *cli.Context, e *env, out reloadOutput, kept string) error {
	if c.Bool("json") {
		if err := printJSON(e.stdout, out); err != nil {
			return err
		}
		return silent(exitFailure)
	}
	printWarnings(e.stderr, out.Warnings)
	hint := "fix them and reload again; check the file with: ductile config check --config " + out.Config
	if out.Forceable {
		hint += "; or apply it anyway, without what these errors name: ductile system reload --force"
	}
	return hintf(errcode.InvalidConfig, hint, "%s: %s has %d error(s):\n  %s", kept, out.Config, len(out.Errors), strings.Join(out.Errors, "\n  "))
}

// printReloadWarnings prints on w, after an applied reload, the errors it
// was forced past and the config's warnings.
func printReloadWarnings(w io.Writer, out reloadOutput) {
	for _, e := range out.Errors {
		fmt.Fprintf(w, "warning: an error applied anyway (--force): %s\n", e)
	}
	for _, warning := range out.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	for _, p := range out.Skipped {
		fmt.Fprintf(w, "warning: pipeline %s is skipped (it does not run): %s; install or fix the plugin, then reload\n", p.Name, p.Reason)
	}
}

// daemonEnv is loadEnv for a command about the running daemon, which
// needs only the state directory: with --state-dir (or $DUCTILE_STATE_DIR)
// given, a broken --config does not stop it (reloading a broken file is
// how the daemon gets to say what is wrong with it).
func daemonEnv(c *cli.Context) (*env, error) {
	e, err := loadEnv(c)
	if err != nil && c.String("state-dir") != "" {
		return newEnv(c, config.Default())
	}
	return e, err
}

// reloadDryRun loads the daemon's config file, discovers its plugins and
// checks them as a reload would (daemon.CheckReload), and prints every
// error, and what would change; exit 1 if the reload would be refused.
func reloadDryRun(c *cli.Context, e *env, l *ledger.Ledger, applied events.ConfigAppliedData, out reloadOutput) error {
	out.DryRun = true
	registrations, err := engine.ReadRegistrations(c.Context, l)
	if err != nil {
		return err
	}
	rc, err := daemon.CheckReload(applied.Settings.Source, true, func(cfg *config.Config) (*pluginhost.Registry, []error, error) {
		return daemon.DiscoverPlugins(e.stateDir, cfg, e.quietLogger())
	}, daemon.RegisteredPlugins(registrations))
	if err != nil {
		return err
	}
	out.Errors, out.Warnings, out.Forceable = rc.Errors, rc.Warnings, rc.Forceable
	if refused := rc.Refused(c.Bool("force")); refused != nil {
		out.Error = refused.Error()
		return reloadRefused(c, e, out, "a reload would be refused, the daemon keeping its config")
	}
	out.Forced = len(out.Errors) > 0
	a := daemon.Applied(rc.Plugins, rc.Config, "reload")
	var notes []string
	out.OK, out.Hash = true, a.Settings.Hash
	out.Changes, notes = comparable(rc.Config, config.DiffSettings(a.Settings, applied.Settings))
	out.Warnings = append(out.Warnings, notes...)
	out.Added, out.Removed = pluginChanges(applied, a)
	out.Skipped = rc.SkippedPipelines
	out.Ends = map[string]int{}
	for _, name := range out.Removed {
		queued, err := views.ListJobs(c.Context, l, views.JobFilter{Status: events.StatusQueued, Plugin: name, Limit: 100000})
		if err != nil {
			return err
		}
		if len(queued) > 0 {
			out.Ends[name] = len(queued)
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	fmt.Fprintf(e.stdout, "a reload of %s would apply: %s\n", out.Config, describeChanges(out))
	printChanges(e.stdout, out.Changes)
	for name, n := range out.Ends {
		fmt.Fprintf(e.stdout, "  %d queued job(s) of %s would be canceled\n", n, name)
	}
	printReloadWarnings(e.stderr, out)
	fmt.Fprintln(e.stdout, "(run without --dry-run to reload)")
	return nil
}

// comparable splits diffs, the settings of cfg that differ from what the
// daemon applied, into those that do, and a note for each that depends on
// a ${VAR} this shell does not set (config.LoadDeferred): the daemon
// resolved it, this process cannot compare it.
func comparable(cfg *config.Config, diffs []events.SettingChange) (kept []events.SettingChange, notes []string) {
	kept = []events.SettingChange{}
	for _, d := range diffs {
		if names := cfg.UnsetBehind(d.Path); len(names) > 0 {
			notes = append(notes, fmt.Sprintf("%s: not compared: it depends on %s, not set in this shell (the daemon reads its own environment)", d.Path, strings.Join(names, ", ")))
			continue
		}
		kept = append(kept, d)
	}
	return kept, notes
}

// pluginChanges names the plugins b runs (loaded and enabled) that a did
// not, and those a ran that b does not.
func pluginChanges(a, b events.ConfigAppliedData) (added, removed []string) {
	runs := func(d events.ConfigAppliedData) map[string]bool {
		m := map[string]bool{}
		for _, p := range d.Plugins {
			if p.Enabled {
				m[p.Name] = true
			}
		}
		return m
	}
	before, after := runs(a), runs(b)
	added, removed = []string{}, []string{}
	for _, p := range b.Plugins {
		if after[p.Name] && !before[p.Name] {
			added = append(added, p.Name)
		}
	}
	for _, p := range a.Plugins {
		if before[p.Name] && !after[p.Name] {
			removed = append(removed, p.Name)
		}
	}
	return added, removed
}

func describeChanges(out reloadOutput) string {
	parts := []string{fmt.Sprintf("%d setting(s) changed", len(out.Changes))}
	if len(out.Added) > 0 {
		parts = append(parts, "plugins added: "+strings.Join(out.Added, ", "))
	}
	if len(out.Removed) > 0 {
		parts = append(parts, "plugins removed or disabled: "+strings.Join(out.Removed, ", "))
	}
	if out.Forced {
		parts = append(parts, fmt.Sprintf("forced past %d error(s)", len(out.Errors)))
	}
	return strings.Join(parts, "; ")
}

func printChanges(w io.Writer, changes []events.SettingChange) {
	for _, d := range changes {
		fmt.Fprintf(w, "  %s: %s -> %s\n", d.Path, showValue(d.Applied), showValue(d.File))
	}
}

// showValue writes a setting's value for people; nil is "(unset)".
func showValue(v any) string {
	if v == nil {
		return "(unset)"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// orEmpty is s, or an empty slice for nil: JSON shows [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func orDefaults(source string) string {
	if source == "" {
		return "(no config file: built-in defaults)"
	}
	return source
}

// waitError says why waiting on the daemon gave up.
func waitError(err error, pid int, timeout time.Duration) error {
	switch {
	case errors.Is(err, daemon.ErrDaemonStopped):
		return failf("the daemon (pid %d) stopped before it answered", pid)
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(errcode.Timeout, "the daemon (pid %d) did not answer within %v: see its log", pid, timeout)
	}
	return err
}

func mustAbsPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	return abs
}
