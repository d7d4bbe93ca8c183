package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
)

// cliEngine is the runtime an intent of the CLI acts with: the Engine of
// the config the running daemon applied (its last config.applied: its
// settings and the plugins it loaded), or, without a daemon, of this
// process's config and the plugins it discovers now. One is built per
// process.
type cliEngine struct {
	*engine.Engine
	daemonPID int // 0: this process's own
	// stateDir is the daemon's, for a hint on a plugin it did not load.
	stateDir string
}

// discoveredEngine is the Engine of a registry this process loaded, acting
// on l (nil: none open; it then only checks).
func discoveredEngine(e *env, reg *pluginhost.Registry, l *ledger.Ledger) cliEngine {
	return cliEngine{Engine: engine.New(engine.Options{Ledger: l, Config: e.cfg, Applied: daemon.Applied(reg, e.cfg, ""), Plugins: reg})}
}

// appliedWait bounds how long the CLI waits for a daemon that holds the lock
// to record what it loaded (it does so just after taking the lock).
const appliedWait = 10 * time.Second

// daemonEngine is the Engine of what the daemon holding the state directory
// (pid) recorded it applied, acting on l, waiting up to appliedWait for its
// record (daemon.WaitApplied).
func daemonEngine(ctx context.Context, e *env, l *ledger.Ledger, pid int) (cliEngine, error) {
	waitCtx, cancel := context.WithTimeout(ctx, appliedWait)
	defer cancel()
	a, err := daemon.WaitApplied(waitCtx, e.stateDir, l, pid)
	switch {
	case errors.Is(err, daemon.ErrDaemonStopped):
		return cliEngine{}, failf("the daemon (pid %d) stopped while its plugins were being looked up: run the command again", pid)
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return cliEngine{}, failf("the daemon (pid %d) has not recorded which plugins it loaded (no config.applied in the ledger after %v): restart it with this version of ductile",
			pid, appliedWait)
	case err != nil:
		return cliEngine{}, err
	}
	cfg, err := appliedConfig(a)
	if err != nil {
		return cliEngine{}, err
	}
	return cliEngine{Engine: engine.New(engine.Options{Ledger: l, Config: cfg, Applied: a}), daemonPID: a.PID, stateDir: e.stateDir}, nil
}

// appliedConfig is the config a daemon's config.applied record says it
// decides with (config.FromSettings).
func appliedConfig(a events.ConfigAppliedData) (*config.Config, error) {
	if a.Settings.Hash == "" {
		return nil, failf("the daemon (pid %d) did not record its settings: restart it with this version of ductile", a.PID)
	}
	cfg, err := config.FromSettings(a.Settings)
	if err != nil {
		return nil, failf("the daemon's (pid %d) recorded settings cannot be read: %v", a.PID, err)
	}
	return cfg, nil
}

// which says whose plugins these are, for messages.
func (s cliEngine) which() string {
	if s.daemonPID != 0 {
		return fmt.Sprintf("plugins the daemon (pid %d) loaded", s.daemonPID)
	}
	return "plugins found"
}

// whoRuns says who will run a job enqueued now.
func (s cliEngine) whoRuns() string {
	if s.daemonPID != 0 {
		return fmt.Sprintf("the daemon (pid %d) will run it", s.daemonPID)
	}
	return "no daemon is running: it waits for one (ductile system start)"
}

// ranBy is who would run a new job, for --json: daemon, or none (no daemon
// is running).
func (s cliEngine) ranBy() string {
	if s.daemonPID == 0 {
		return "none"
	}
	return "daemon"
}

// refused is the CLI's error for an intent's *commands.TargetError (other
// errors are returned as they are): why the plugin cannot take the job
// (skipped, with the reason; disabled; unknown, with the nearest name; a
// daemon's that a reload would load) or has no such command. defaulted:
// the command was not named (plugin run without --command).
func (s cliEngine) refused(err error, defaulted bool) error {
	var target *commands.TargetError
	if !errors.As(err, &target) {
		return err
	}
	name := target.Plugin
	switch {
	case target.Kind == commands.ErrCommandUnknown:
		how := ""
		if defaulted {
			how = " (the default; pick one with --command)"
		}
		return hintf(errcode.NotFound, "its commands: "+orNothing(target.Known), "plugin %q has no command %q%s%s", name, target.Command, how, meant(target.Nearest))
	case target.Kind == commands.ErrPluginUnrunnable:
		return hintf(errcode.Conflict, "fix its files; see: ductile plugin list", "%s", target.Error())
	case s.reloadLoads(name):
		// The daemon loads plugins when it starts and reloads: not since.
		var msg string
		switch target.Kind {
		case commands.ErrPluginDisabled:
			msg = fmt.Sprintf("plugin %q is disabled in the config the daemon (pid %d) applied; %s enables it now", name, s.daemonPID, s.Applied().Settings.Source)
		case commands.ErrPluginSkipped:
			msg = fmt.Sprintf("plugin %q was not loaded by the daemon (pid %d): %s; it would load now", name, s.daemonPID, target.Reason)
		default:
			msg = fmt.Sprintf("the daemon (pid %d) has not loaded plugin %q: it was not there when the daemon started or last reloaded, and the plugin roots of %s have it now",
				s.daemonPID, name, s.Applied().Settings.Source)
		}
		return hintf(errcode.Conflict, "load it with: ductile system reload (what it would change: ductile system reload --dry-run)", "%s", msg)
	}
	switch target.Kind {
	case commands.ErrPluginDisabled:
		return conflictf("%s", target.Error())
	case commands.ErrPluginSkipped:
		then := ""
		if s.daemonPID != 0 {
			then = ", then: ductile system reload"
		}
		return hintf(errcode.Conflict, "fix it"+then+"; see: ductile plugin list", "%s", target.Error())
	}
	return hintf(errcode.NotFound, fmt.Sprintf("%s: %s; see: ductile plugin list", s.which(), orNothing(target.Known)), "%s", target.Error())
}

// reloadLoads reports whether a reload of the daemon's config file would
// run plugin name (found by discovery and enabled), which the daemon does
// not run now. False without a daemon, or a config file.
func (s cliEngine) reloadLoads(name string) bool {
	if s.daemonPID == 0 || s.Applied().Settings.Source == "" {
		return false
	}
	cfg, err := config.LoadDeferred(s.Applied().Settings.Source)
	if err != nil || !cfg.Plugin(name).Enabled {
		return false
	}
	reg, _, err := daemon.DiscoverPlugins(s.stateDir, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return false
	}
	_, ok := reg.Get(name)
	return ok
}

// resolved refuses a job of plugin this process would run itself (no
// daemon) while its config needs a ${VAR} this shell does not set: the
// plugin would get the placeholder, not the value. A daemon resolves them
// in its own environment.
func (s cliEngine) resolved(plugin string) error {
	if s.daemonPID != 0 {
		return nil
	}
	unset := s.Config().UnsetFor(plugin)
	if len(unset) == 0 {
		return nil
	}
	lines := make([]string, len(unset))
	for i, fe := range unset {
		lines[i] = fe.Error()
	}
	return hintf(errcode.InvalidConfig, "set it in this shell, or start the daemon (ductile system start, with the variable in its environment): with a daemon running, the daemon runs the job",
		"no daemon is running, so this command would run the job of %s itself, and its config needs what this shell does not set:\n%s", plugin, strings.Join(lines, "\n"))
}

// didYouMean is ": did you mean "x"?" for the name config.Suggest finds
// nearest to name, if one is near enough to be a typo, else "".
func didYouMean(name string, names []string) string {
	return meant(config.Suggest(name, names))
}

// meant is ": did you mean "nearest"?", or "" when there is no nearest name
// (commands.TargetError.Nearest).
func meant(nearest string) string {
	if nearest == "" {
		return ""
	}
	return fmt.Sprintf(": did you mean %q?", nearest)
}

func orNothing(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// currentEngine is the Engine an intent is checked against and made with
// now: the running daemon's, else one of what this process discovers.
// l is the ledger, if the caller has it open (nil: the Engine only checks,
// as a dry run does).
func currentEngine(ctx context.Context, e *env, l *ledger.Ledger) (cliEngine, error) {
	h, err := daemon.Holder(e.stateDir)
	if err != nil {
		return cliEngine{}, err
	}
	if h.Daemon() {
		if l == nil {
			if l, err = e.openLedger(ctx); err != nil {
				return cliEngine{}, err
			}
			defer l.Close()
			eng, err := daemonEngine(ctx, e, l, h.PID)
			if err != nil {
				return eng, err
			}
			if _, err := eng.Workers(ctx); err != nil { // read now: a pipeline's remote steps are checked against them
				return eng, err
			}
			eng.Engine = eng.OnLedger(nil) // l is closed on return
			return eng, nil
		}
		return daemonEngine(ctx, e, l, h.PID)
	}
	reg, _, err := daemon.DiscoverPlugins(e.stateDir, e.cfg, e.quietLogger())
	if err != nil {
		return cliEngine{}, err
	}
	return discoveredEngine(e, reg, l), nil
}
