package commands

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// Why a plugin command cannot be enqueued on a daemon's applied plugins.
var (
	ErrPluginUnknown  = errors.New("no such plugin")
	ErrPluginDisabled = errors.New("plugin disabled")
	ErrPluginSkipped  = errors.New("plugin not loaded")
	ErrCommandUnknown = errors.New("no such command")
	// ErrPluginUnrunnable: loaded, but its entrypoint can no longer be run
	// (made not executable, removed, since it was loaded).
	ErrPluginUnrunnable = errors.New("plugin cannot run")
)

// TargetError says why a plugin or command is not a target: Kind is one of
// the Err* above.
type TargetError struct {
	Kind    error
	Plugin  string
	Command string   // ErrCommandUnknown
	Reason  string   // ErrPluginSkipped: why it was not loaded; ErrPluginUnrunnable: why it cannot run
	Known   []string // the plugins (or the plugin's commands) there are
	Nearest string   // the known name nearest to the one asked, if near enough to be a typo
}

func (e *TargetError) Error() string {
	mean := ""
	if e.Nearest != "" {
		mean = fmt.Sprintf(": did you mean %q?", e.Nearest)
	}
	switch e.Kind {
	case ErrPluginDisabled:
		return fmt.Sprintf("plugin %q is disabled in the config (plugins.%s.enabled: false)", e.Plugin, e.Plugin)
	case ErrPluginSkipped:
		return fmt.Sprintf("plugin %q was not loaded: %s", e.Plugin, e.Reason)
	case ErrPluginUnrunnable:
		return fmt.Sprintf("plugin %q cannot run now: %s", e.Plugin, e.Reason)
	case ErrCommandUnknown:
		return fmt.Sprintf("plugin %q has no command %q%s", e.Plugin, e.Command, mean)
	}
	return fmt.Sprintf("no plugin named %q%s", e.Plugin, mean)
}

func (e *TargetError) Unwrap() error { return e.Kind }

// TargetPlugin returns the loaded, enabled plugin named name among those a
// daemon applied, or a *TargetError saying why there is none.
func TargetPlugin(applied events.ConfigAppliedData, name string) (events.AppliedPlugin, error) {
	for _, p := range applied.Plugins {
		if p.Name != name {
			continue
		}
		if !p.Enabled {
			return p, &TargetError{Kind: ErrPluginDisabled, Plugin: name}
		}
		return p, nil
	}
	for _, skipped := range applied.Skipped {
		if skipped.Name == name {
			return events.AppliedPlugin{}, &TargetError{Kind: ErrPluginSkipped, Plugin: name, Reason: skipped.Reason}
		}
	}
	var names []string
	for _, p := range applied.Plugins {
		names = append(names, p.Name)
	}
	return events.AppliedPlugin{}, &TargetError{Kind: ErrPluginUnknown, Plugin: name, Known: names, Nearest: config.Suggest(name, names)}
}

// TargetCommand returns plugin p's manifest command named name, or a
// *TargetError (ErrCommandUnknown).
func TargetCommand(p events.AppliedPlugin, name string) (events.AppliedCommand, error) {
	var names []string
	for _, c := range p.Commands {
		names = append(names, c.Name)
	}
	if i := slices.IndexFunc(p.Commands, func(c events.AppliedCommand) bool { return c.Name == name }); i >= 0 {
		return p.Commands[i], nil
	}
	return events.AppliedCommand{}, &TargetError{Kind: ErrCommandUnknown, Plugin: p.Name, Command: name, Known: names, Nearest: config.Suggest(name, names)}
}
