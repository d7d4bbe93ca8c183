package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
)

// pluginSet is what an enqueue from the CLI is checked against: the plugins
// the running daemon recorded it loaded (its last config.applied), or,
// without a daemon, the plugins this process discovers now.
type pluginSet struct {
	applied   events.ConfigAppliedData
	daemonPID int // 0: discovered by this process
	// config is what jobs are built with: the daemon's applied settings,
	// or this process's config.
	config *config.Config
	// stateDir is the daemon's, for a hint on a plugin it did not load.
	stateDir string
}

// discoveredPlugins is the set of a registry this process loaded.
func discoveredPlugins(e *env, reg *pluginhost.Registry) pluginSet {
	return pluginSet{applied: daemon.Applied(reg, e.cfg, ""), config: e.cfg}
}

// appliedWait bounds how long the CLI waits for a daemon that holds the lock
// to record what it loaded (it does so just after taking the lock).
const appliedWait = 10 * time.Second

// daemonPlugins reads what the daemon holding the state directory (pid)
// recorded it loaded, waiting up to appliedWait for its record
// (daemon.WaitApplied).
func daemonPlugins(ctx context.Context, e *env, l *ledger.Ledger, pid int) (pluginSet, error) {
	waitCtx, cancel := context.WithTimeout(ctx, appliedWait)
	defer cancel()
	a, err := daemon.WaitApplied(waitCtx, e.stateDir, l, pid)
	switch {
	case errors.Is(err, daemon.ErrDaemonStopped):
		return pluginSet{}, failf("the daemon (pid %d) stopped while its plugins were being looked up: run the command again", pid)
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return pluginSet{}, failf("the daemon (pid %d) has not recorded which plugins it loaded (no config.applied in the ledger after %v): restart it with this version of ductile",
			pid, appliedWait)
	case err != nil:
		return pluginSet{}, err
	}
	cfg, err := appliedConfig(a)
	if err != nil {
		return pluginSet{}, err
	}
	return pluginSet{applied: a, daemonPID: a.PID, config: cfg, stateDir: e.stateDir}, nil
}

// appliedConfig is the config a daemon's config.applied record says it
// decides with (config.Settings.Config).
func appliedConfig(a events.ConfigAppliedData) (*config.Config, error) {
	if a.Settings.Hash == "" {
		return nil, failf("the daemon (pid %d) did not record its settings: restart it with this version of ductile", a.PID)
	}
	cfg, err := a.Settings.Config()
	if err != nil {
		return nil, failf("the daemon's (pid %d) recorded settings cannot be read: %v", a.PID, err)
	}
	return cfg, nil
}

// which says whose plugins these are, for messages.
func (s pluginSet) which() string {
	if s.daemonPID != 0 {
		return fmt.Sprintf("plugins the daemon (pid %d) loaded", s.daemonPID)
	}
	return "plugins found"
}

// plugin returns the loaded, enabled plugin named name, or an error that
// says why there is none: skipped (with the reason), disabled, or unknown
// (with the nearest name).
func (s pluginSet) plugin(name string) (events.AppliedPlugin, error) {
	p, err := commands.TargetPlugin(s.applied, name)
	var target *commands.TargetError
	if !errors.As(err, &target) {
		return p, err
	}
	if s.reloadLoads(name) {
		// The daemon loads plugins when it starts and reloads: not since.
		var msg string
		switch target.Kind {
		case commands.ErrPluginDisabled:
			msg = fmt.Sprintf("plugin %q is disabled in the config the daemon (pid %d) applied; %s enables it now", name, s.daemonPID, s.applied.Settings.Source)
		case commands.ErrPluginSkipped:
			msg = fmt.Sprintf("plugin %q was not loaded by the daemon (pid %d): %s; it would load now", name, s.daemonPID, target.Reason)
		default:
			msg = fmt.Sprintf("the daemon (pid %d) has not loaded plugin %q: it was not there when the daemon started or last reloaded, and the plugin roots of %s have it now",
				s.daemonPID, name, s.applied.Settings.Source)
		}
		return p, hintf(errcode.Conflict, "load it with: ductile system reload (what it would change: ductile system reload --dry-run)", "%s", msg)
	}
	switch target.Kind {
	case commands.ErrPluginDisabled:
		return p, conflictf("%s", target.Error())
	case commands.ErrPluginSkipped:
		then := ""
		if s.daemonPID != 0 {
			then = ", then: ductile system reload"
		}
		return p, hintf(errcode.Conflict, "fix it"+then+"; see: ductile plugin list", "%s", target.Error())
	}
	return p, hintf(errcode.NotFound, fmt.Sprintf("%s: %s; see: ductile plugin list", s.which(), orNothing(target.Known)), "%s", target.Error())
}

// reloadLoads reports whether a reload of the daemon's config file would
// run plugin name (found by discovery and enabled), which the daemon does
// not run now. False without a daemon, or a config file.
func (s pluginSet) reloadLoads(name string) bool {
	if s.daemonPID == 0 || s.applied.Settings.Source == "" {
		return false
	}
	cfg, err := config.LoadDeferred(s.applied.Settings.Source)
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
func (s pluginSet) resolved(plugin string) error {
	if s.daemonPID != 0 {
		return nil
	}
	unset := s.config.UnsetFor(plugin)
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

// command picks and checks the command to run: the one asked for, or by
// default handle when a payload is given (if the plugin declares it), else
// the plugin's only command, else poll.
func (s pluginSet) command(p events.AppliedPlugin, asked string, hasPayload bool) (string, error) {
	var names []string
	for _, c := range p.Commands {
		names = append(names, c.Name)
	}
	cmd := asked
	if cmd == "" {
		cmd = defaultCommand(names, hasPayload)
	}
	if slices.Contains(names, cmd) {
		return cmd, nil
	}
	how := ""
	if asked == "" {
		how = " (the default; pick one with --command)"
	}
	return "", hintf(errcode.NotFound, "its commands: "+orNothing(names), "plugin %q has no command %q%s%s", p.Name, cmd, how, didYouMean(cmd, names))
}

// defaultCommand is plugin run's command when --command is not given.
func defaultCommand(commands []string, hasPayload bool) string {
	switch {
	case hasPayload && slices.Contains(commands, "handle"):
		return "handle"
	case len(commands) == 1:
		return commands[0]
	}
	return "poll"
}

// didYouMean is ": did you mean "x"?" for the name config.Suggest finds
// nearest to name, if one is near enough to be a typo, else "".
func didYouMean(name string, names []string) string {
	if best := config.Suggest(name, names); best != "" {
		return fmt.Sprintf(": did you mean %q?", best)
	}
	return ""
}

func orNothing(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
