package engine

import (
	"errors"
	"slices"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Target is the plugin command a job of plugin's command would run: the
// plugin loaded and enabled in the applied config, with that command, and
// its entrypoint still an executable file (pluginhost.Plugin.Runnable: a
// chmod -x or a removal since the plugin was loaded). Else a
// *commands.TargetError says why, with the names there are and the one
// nearest to what was asked (did you mean).
func (e *Engine) Target(plugin, command string) (events.AppliedPlugin, events.AppliedCommand, error) {
	p, err := e.Plugin(plugin)
	if err != nil {
		return p, events.AppliedCommand{}, err
	}
	c, err := e.targetCommand(p, command)
	return p, c, err
}

// Plugin is the plugin named name, loaded and enabled in the applied
// config, or a *commands.TargetError saying why there is none (skipped,
// disabled, unknown with the nearest name).
func (e *Engine) Plugin(name string) (events.AppliedPlugin, error) {
	p, err := commands.TargetPlugin(e.applied, name)
	if err == nil || !e.config.Plugin(name).RunsOn.Remote() || !e.config.Plugin(name).Enabled {
		return p, err
	}
	if remote, ok := e.remotePlugin(name); ok {
		return remote.Applied(), nil // runs_on remote or any: as a worker registered it
	}
	var target *commands.TargetError
	if errors.As(err, &target) && target.Kind == commands.ErrPluginUnknown {
		// Placed on remote workers, none of which has registered it yet.
		return p, &commands.TargetError{Kind: commands.ErrPluginUnrunnable, Plugin: name,
			Reason: "its jobs run on remote workers (runs_on), and no worker serving it has registered yet: start one (it registers at start)"}
	}
	return p, err
}

// targetCommand is Target's check of a plugin found loaded and enabled.
func (e *Engine) targetCommand(p events.AppliedPlugin, command string) (events.AppliedCommand, error) {
	c, err := commands.TargetCommand(p, command)
	if err != nil {
		return c, err
	}
	if e.plugins != nil {
		if loaded, ok := e.plugins.Get(p.Name); ok {
			if err := loaded.Runnable(); err != nil {
				return c, &commands.TargetError{Kind: commands.ErrPluginUnrunnable, Plugin: p.Name, Reason: err.Error()}
			}
		}
	}
	return c, nil
}

// DefaultCommand is the command a job of plugin p runs when none is named:
// handle when a payload is given and p has it, else p's only command, else
// poll.
func DefaultCommand(p events.AppliedPlugin, hasPayload bool) string {
	has := func(name string) bool {
		return slices.ContainsFunc(p.Commands, func(c events.AppliedCommand) bool { return c.Name == name })
	}
	switch {
	case hasPayload && has("handle"):
		return "handle"
	case len(p.Commands) == 1:
		return p.Commands[0].Name
	}
	return "poll"
}
