// Package engine is Ductile's runtime for one applied config: the config,
// what was applied of it (config.applied), the plugins loaded for it, its
// compiled pipelines and the one pipeline runtime that moves their runs on.
// Every front end (the HTTP API, webhooks, the CLI, the dispatcher) asks an
// Engine to act (enqueue, retry, replay, cancel, start a pipeline, complete
// an attempt) rather than building commands itself.
//
// A daemon builds one Engine per applied config and swaps it whole on a
// reload; a CLI process with no daemon builds one for itself. An Engine
// never changes after New: a job keeps the Engine its start was claimed
// with until its outcome is recorded.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

// Options are what an Engine is built from.
type Options struct {
	Ledger  *ledger.Ledger
	Config  *config.Config
	Applied events.ConfigAppliedData // the config.applied recorded for Config
	Plugins *pluginhost.Registry
	// Pipelines are Config's compiled pipelines.
	Pipelines *pipeline.Set
	// StartRun records a run's start: nil, commands.StartPipeline (a test
	// replaces it to play the pipeline runtime).
	StartRun func(ctx context.Context, l *ledger.Ledger, cmd commands.StartRun) (commands.RunStartedResult, error)
	// Fleet is what the daemon's Engines share about remote workers (nil:
	// a Fleet of this Engine's own, with the defaults). A reload passes the
	// old Engine's on.
	Fleet *Fleet
}

// Engine is the runtime of one applied config. Its methods are safe for
// concurrent use.
type Engine struct {
	ledger    *ledger.Ledger
	config    *config.Config
	applied   events.ConfigAppliedData
	plugins   *pluginhost.Registry
	pipelines *commands.Pipelines // one per applied config: its cache serves every run
	auth      *auth.Registry      // the API's tokens and the webhooks' secrets
	startRun  func(context.Context, *ledger.Ledger, commands.StartRun) (commands.RunStartedResult, error)
	fleet     *Fleet

	mu      sync.Mutex
	configs map[string]json.RawMessage // plugin configs as JSON, encoded once

	claiming claiming // topic messages a claim of this Engine is deciding on (topic_claim.go)
}

// New builds the Engine of an applied config.
func New(o Options) *Engine {
	if o.StartRun == nil {
		o.StartRun = commands.StartPipeline
	}
	if o.Fleet == nil {
		o.Fleet = NewFleet(FleetOptions{})
	}
	return &Engine{
		fleet:     o.Fleet,
		startRun:  o.StartRun,
		ledger:    o.Ledger,
		config:    o.Config,
		applied:   o.Applied,
		plugins:   o.Plugins,
		pipelines: &commands.Pipelines{Set: o.Pipelines, Config: o.Config},
		auth:      auth.New(o.Config),
		configs:   map[string]json.RawMessage{},
	}
}

// Ledger is the ledger the Engine writes to.
func (e *Engine) Ledger() *ledger.Ledger { return e.ledger }

// Config is the applied config (read-only).
func (e *Engine) Config() *config.Config { return e.config }

// Applied is the config.applied recorded for the config.
func (e *Engine) Applied() events.ConfigAppliedData { return e.applied }

// Plugins are the plugins loaded for the config.
func (e *Engine) Plugins() *pluginhost.Registry { return e.plugins }

// Pipelines are the config's compiled pipelines.
func (e *Engine) Pipelines() *pipeline.Set { return e.pipelines.Set }

// PipelineRuntime is the one pipeline runtime of this config: every command
// that moves a run on uses it, so its cache of compiled pipelines is shared.
func (e *Engine) PipelineRuntime() *commands.Pipelines { return e.pipelines }

// Fleet is what the daemon's Engines share about remote workers.
func (e *Engine) Fleet() *Fleet { return e.fleet }

// Auth is the tokens and webhook secrets of the config.
func (e *Engine) Auth() *auth.Registry { return e.auth }

// CannotRun says why jobs of plugin's command cannot run here: the plugin
// was not loaded (with discovery's reason), is disabled, or lacks the
// command; nil if they can.
func (e *Engine) CannotRun(plugin, command string) error {
	if remote, ok := e.remotePlugin(plugin); ok && e.config.Plugin(plugin).RunsOn.Remote() {
		if !slices.ContainsFunc(remote.Commands, func(c events.AppliedCommand) bool { return c.Name == command }) {
			return fmt.Errorf("plugin %q has no command %q (as its workers registered it)", plugin, command)
		}
		if !e.config.Plugin(plugin).Enabled {
			return fmt.Errorf("plugin %q is disabled in the config (plugins.%s.enabled: false)", plugin, plugin)
		}
		return nil
	}
	p, ok := e.plugins.Get(plugin)
	if !ok {
		for _, skipped := range e.plugins.Skipped() {
			if skipped.Name == plugin && !errors.Is(skipped, pluginhost.ErrShadowed) {
				return fmt.Errorf("plugin %q was not loaded: %v (fix it, then: ductile system reload)", plugin, skipped.Err)
			}
		}
		return fmt.Errorf("plugin %q is not installed or failed to load (see: ductile plugin list)", plugin)
	}
	if !e.config.Plugin(plugin).Enabled {
		return fmt.Errorf("plugin %q is disabled in the config (plugins.%s.enabled: false)", plugin, plugin)
	}
	if _, ok := p.Command(command); !ok {
		return fmt.Errorf("plugin %q has no command %q", plugin, command)
	}
	return nil
}

// PluginConfig is a plugin's config as JSON, encoded once.
func (e *Engine) PluginConfig(plugin string) (json.RawMessage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.configs[plugin]; ok {
		return b, nil
	}
	b, err := json.Marshal(e.config.Plugin(plugin).Config)
	if err == nil {
		e.configs[plugin] = b
	}
	return b, err
}
