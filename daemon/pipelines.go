package daemon

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

// CompilePipelines compiles cfg's pipelines, checking that every uses step
// names a command of a plugin reg loaded. An invalid pipeline (the DSL, or a
// command a loaded plugin lacks) refuses the start or the reload, as an
// invalid config does; a pipeline whose uses step names a plugin reg did not
// load (skipped, or not installed) is skipped, logged with the fix and
// returned with the reason, and the others run.
func CompilePipelines(cfg *config.Config, reg *pluginhost.Registry, log *slog.Logger) (*pipeline.Set, []events.SkippedPipeline, error) {
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
			return nil // a plugin that did not load: its pipelines are skipped below
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
			why := "is not installed"
			if reason, ok := skippedPlugins[n.Plugin]; ok {
				why = "was skipped: " + reason
			}
			reason := fmt.Sprintf("step %s uses plugin %q, which %s", id, n.Plugin, why)
			log.Warn("pipeline skipped: it uses a plugin that did not load; fix or install the plugin (see: ductile plugin list), then reload",
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
