package dispatch

import (
	"encoding/json"
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
