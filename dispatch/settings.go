package dispatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

// settings are what jobs run with: the config and the plugins loaded for
// it. A reload swaps them (Dispatcher.Apply); a job keeps the ones its start
// was claimed with until its outcome is recorded.
type settings struct {
	config  *config.Config
	plugins *pluginhost.Registry
	// pipelines are the compiled pipelines of config, with it: the
	// completions a job's end moves runs on with and the runs it triggers.
	pipelines *commands.Pipelines

	mu      sync.Mutex
	configs map[string]json.RawMessage // plugin configs as JSON, encoded once
}

func newSettings(cfg *config.Config, reg *pluginhost.Registry, set *pipeline.Set) *settings {
	return &settings{config: cfg, plugins: reg, configs: map[string]json.RawMessage{},
		pipelines: &commands.Pipelines{Set: set, Config: cfg}}
}

// cannotRun says why jobs of plugin's command cannot run with s: the
// plugin was not loaded (with discovery's reason), is disabled, or lacks
// the command; nil if they can.
func (s *settings) cannotRun(plugin, command string) error {
	p, ok := s.plugins.Get(plugin)
	if !ok {
		for _, skipped := range s.plugins.Skipped() {
			if skipped.Name == plugin && !errors.Is(skipped, pluginhost.ErrShadowed) {
				return fmt.Errorf("plugin %q was not loaded: %v (fix it, then: ductile system reload)", plugin, skipped.Err)
			}
		}
		return fmt.Errorf("plugin %q is not installed or failed to load (see: ductile plugin list)", plugin)
	}
	if !s.config.Plugin(plugin).Enabled {
		return fmt.Errorf("plugin %q is disabled in the config (plugins.%s.enabled: false)", plugin, plugin)
	}
	if _, ok := p.Command(command); !ok {
		return fmt.Errorf("plugin %q has no command %q", plugin, command)
	}
	return nil
}

// pluginConfig is a plugin's config as JSON, encoded once: settings do not
// change (a reload makes new ones).
func (s *settings) pluginConfig(plugin string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.configs[plugin]; ok {
		return b, nil
	}
	b, err := json.Marshal(s.config.Plugin(plugin).Config)
	if err == nil {
		s.configs[plugin] = b
	}
	return b, err
}
