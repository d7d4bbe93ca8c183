package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

// CompilePipelines compiles cfg's pipelines, checking that every uses step
// names a command of a plugin reg loaded. An invalid pipeline refuses the
// start or the reload, as an invalid config does.
func CompilePipelines(cfg *config.Config, reg *pluginhost.Registry) (*pipeline.Set, error) {
	return pipeline.Compile(cfg, func(plugin, command string) error {
		p, ok := reg.Get(plugin)
		if !ok {
			return fmt.Errorf("plugin %q is not installed or failed to load (see: ductile plugin list)", plugin)
		}
		if _, ok := p.Command(command); !ok {
			return fmt.Errorf("plugin %q has no command %q", plugin, command)
		}
		return nil
	})
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

// Pipelines are the compiled pipelines the daemon runs now: what POST
// /pipeline/{name} and the CLI start runs of.
func (d *Daemon) Pipelines() *pipeline.Set { return d.current.Load().pipelines }

// pipelineRuntime is what a command ending a job here moves pipeline runs
// on with: the current pipelines and config.
func (d *Daemon) pipelineRuntime() *commands.Pipelines {
	c := d.current.Load()
	return &commands.Pipelines{Set: c.pipelines, Config: c.config}
}
