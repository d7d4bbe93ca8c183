package daemon

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

// RemotePluginOf is a plugin as the registered remote workers serve it
// (engine.RegisteredPlugin over their registrations), ok false when none
// does. A nil RemotePluginOf knows of no worker.
type RemotePluginOf func(name string) (p events.WorkerPlugin, ok bool)

// RegisteredPlugins is the RemotePluginOf of workers' registrations.
func RegisteredPlugins(workers map[string]events.WorkerRegisteredData) RemotePluginOf {
	return func(name string) (events.WorkerPlugin, bool) { return engine.RegisteredPlugin(workers, name) }
}

// remoteStep says how a uses step of plugin's command compiles when the
// plugin is not installed here: placed, when cfg places the (enabled)
// plugin runs_on: remote or any, so the step runs on remote workers; why
// not, when a worker's registration of the plugin lacks the command.
// Without a registration the step compiles: a worker may register later,
// and the step's jobs wait queued until one serving the plugin claims
// them (the claim checks the command).
func remoteStep(cfg *config.Config, remote RemotePluginOf, plugin, command string) (placed bool, why string) {
	if pc := cfg.Plugin(plugin); !pc.Enabled || !pc.RunsOn.Remote() {
		return false, ""
	}
	if remote == nil {
		return true, ""
	}
	wp, ok := remote(plugin)
	if !ok {
		return true, ""
	}
	names := make([]string, len(wp.Commands))
	for i, c := range wp.Commands {
		names[i] = c.Name
	}
	if !slices.Contains(names, command) {
		return true, fmt.Sprintf("has no command %q as its remote workers registered it (its commands: %s)", command, strings.Join(names, ", "))
	}
	return true, ""
}

// CompilePipelines compiles cfg's pipelines, checking that every uses step
// names a command of a plugin reg loaded, or of a plugin cfg places
// runs_on: remote or any, as remote's registrations declare it (not
// installed here: its steps run on the workers). An invalid pipeline (the
// DSL, or a command a loaded plugin lacks) refuses the start or the
// reload, as an invalid config does; a pipeline whose uses step names a
// plugin reg did not load (skipped, or not installed) and no remote worker
// serves, or a command the workers' registration lacks, is skipped, logged
// with the fix and returned with the reason, and the others run.
func CompilePipelines(cfg *config.Config, reg *pluginhost.Registry, remote RemotePluginOf, log *slog.Logger) (*pipeline.Set, []events.SkippedPipeline, error) {
	skippedPlugins := map[string]string{}
	for _, s := range reg.Skipped() {
		skippedPlugins[s.Name] = s.Err.Error()
	}
	set, err := pipeline.Compile(cfg, func(plugin, command string) error {
		p, ok := reg.Get(plugin)
		if !ok {
			if _, dotted := reg.Get(plugin + "." + command); dotted {
				return fmt.Errorf("plugin %q is not installed", plugin) // the compiler tries the dotted name
			}
			return nil // a plugin that did not load: its pipelines are skipped below, unless workers run it
		}
		if _, ok := p.Command(command); !ok {
			return fmt.Errorf("plugin %q has no command %q", plugin, command)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var skipped []events.SkippedPipeline
	for _, name := range slices.Sorted(maps.Keys(set.Pipelines)) {
		p := set.Pipelines[name]
		for _, id := range slices.Sorted(maps.Keys(p.Nodes)) {
			n := p.Nodes[id]
			if n.Kind != pipeline.KindUses {
				continue
			}
			if _, ok := reg.Get(n.Plugin); ok {
				continue
			}
			placed, unfit := remoteStep(cfg, remote, n.Plugin, n.Command)
			if placed && unfit == "" {
				continue // runs on remote workers
			}
			why := "is not installed"
			if reason, ok := skippedPlugins[n.Plugin]; ok {
				why = "was skipped: " + reason
			}
			if unfit != "" {
				why = unfit
			}
			reason := fmt.Sprintf("step %s uses plugin %q, which %s", id, n.Plugin, why)
			log.Warn("pipeline skipped: it uses a plugin that did not load; fix or install the plugin (see: ductile plugin list), "+
				"or place it runs_on: remote and run a worker serving it, then reload",
				"pipeline", name, "step", id, "plugin", n.Plugin, "reason", reason)
			skipped = append(skipped, events.SkippedPipeline{Name: name, Reason: reason})
			break
		}
	}
	if len(skipped) > 0 {
		names := make([]string, len(skipped))
		for i, s := range skipped {
			names[i] = s.Name
		}
		set = set.Without(names...)
	}
	return set, skipped, nil
}

// appliedPipelines are set's pipelines by name and hash, as config.applied
// records them.
func appliedPipelines(set *pipeline.Set) []events.AppliedPipeline {
	if set == nil || len(set.Pipelines) == 0 {
		return nil
	}
	out := make([]events.AppliedPipeline, 0, len(set.Pipelines))
	for _, p := range set.Pipelines {
		out = append(out, events.AppliedPipeline{Name: p.Name, Hash: p.Hash})
	}
	slices.SortFunc(out, func(a, b events.AppliedPipeline) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Pipelines are the compiled pipelines of the config applied now: what POST
// /pipeline/{name} and the CLI start runs of.
func (c *Core) Pipelines() *pipeline.Set { return c.Engine().Pipelines() }
