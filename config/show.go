package config

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// RedactedValue replaces secrets in Redacted output.
const RedactedValue = "[redacted]"

// secretKey matches keys whose values Redacted hides. It is deliberately
// broad ("monkey" matches too): showing less is the safe mistake.
var secretKey = regexp.MustCompile(`(?i)token|secret|password|passwd|key|credential|auth`)

// Redacted returns a copy of c for printing (config show). In plugin config
// maps, schedules, pipelines, api and webhooks it replaces with RedactedValue
// every value under a key matching token, secret, password, passwd, key,
// credential or auth (case-insensitive), and every value filled from
// ${VAR}. The typed settings (paths, numbers, durations, routes) are shown
// as they are.
func (c *Config) Redacted() *Config {
	r := *c
	r.Files = slices.Clone(c.Files)
	r.PluginRoots = slices.Clone(c.PluginRoots)
	r.Routes = slices.Clone(c.Routes)
	r.Plugins = make(map[string]PluginConfig, len(c.Plugins))
	r.pluginConfig = make(map[string]*yaml.Node, len(c.pluginConfig))
	r.interpolated = nil // the copies below hold no interpolated nodes
	for name, p := range c.Plugins {
		if n := c.pluginConfig[name]; n != nil {
			rn := c.redact(n)
			r.pluginConfig[name] = rn
			p.Config, _ = toData(rn, "", func(*yaml.Node, string, string) {}).(map[string]any)
		} else {
			p.Config = maps.Clone(p.Config)
		}
		p.Schedules = c.redact(p.Schedules)
		r.Plugins[name] = p
	}
	r.Pipelines = c.redact(c.Pipelines)
	r.API = c.redact(c.API)
	r.Webhooks = c.redact(c.Webhooks)
	return &r
}

// redact returns a redacted deep copy of n.
func (c *Config) redact(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if c.interpolated[n] {
		return redactedNode(n)
	}
	cp := *n
	cp.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 1 && secretKey.MatchString(n.Content[i-1].Value) && !isNull(child) {
			cp.Content[i] = redactedNode(child)
			continue
		}
		cp.Content[i] = c.redact(child)
	}
	return &cp
}

func redactedNode(n *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: RedactedValue, Line: n.Line, Column: n.Column}
}

// MarshalJSON writes the config in the config file's own schema (durations as
// "30s", paths resolved): the output of config show --json.
func (c *Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.view())
}

// MarshalYAML writes the config in the config file's own schema; the output
// loads back as an equivalent config.
func (c *Config) MarshalYAML() (any, error) {
	return c.view(), nil
}

// The view types give the marshalled form its keys and order. Source and
// Files are left out so that the output is itself a valid config file.
type configView struct {
	StateDir    string                `json:"state_dir,omitempty" yaml:"state_dir,omitempty"`
	PluginRoots []string              `json:"plugin_roots" yaml:"plugin_roots"`
	Service     serviceView           `json:"service" yaml:"service"`
	Plugins     map[string]pluginView `json:"plugins" yaml:"plugins"`
	Routes      []routeView           `json:"routes" yaml:"routes"`
	Pipelines   any                   `json:"pipelines,omitempty" yaml:"pipelines,omitempty"`
	API         any                   `json:"api,omitempty" yaml:"api,omitempty"`
	Webhooks    any                   `json:"webhooks,omitempty" yaml:"webhooks,omitempty"`
}

type serviceView struct {
	MaxWorkers      int    `json:"max_workers" yaml:"max_workers"`
	DedupeTTL       string `json:"dedupe_ttl" yaml:"dedupe_ttl"`
	JobLogRetention string `json:"job_log_retention" yaml:"job_log_retention"`
	AllowSymlinks   bool   `json:"allow_symlinks" yaml:"allow_symlinks"`
}

type pluginView struct {
	Enabled     bool           `json:"enabled" yaml:"enabled"`
	Parallelism int            `json:"parallelism" yaml:"parallelism"`
	Retry       retryView      `json:"retry" yaml:"retry"`
	Timeouts    timeoutsView   `json:"timeouts" yaml:"timeouts"`
	Config      map[string]any `json:"config" yaml:"config"`
	Schedules   any            `json:"schedules,omitempty" yaml:"schedules,omitempty"`
}

type retryView struct {
	MaxAttempts int    `json:"max_attempts" yaml:"max_attempts"`
	BackoffBase string `json:"backoff_base" yaml:"backoff_base"`
}

type timeoutsView struct {
	Poll   string `json:"poll" yaml:"poll"`
	Handle string `json:"handle" yaml:"handle"`
	Health string `json:"health" yaml:"health"`
	Init   string `json:"init" yaml:"init"`
}

type routeView struct {
	From      string `json:"from" yaml:"from"`
	EventType string `json:"event_type" yaml:"event_type"`
	To        string `json:"to" yaml:"to"`
	Command   string `json:"command" yaml:"command"`
}

func (c *Config) view() configView {
	v := configView{
		StateDir:    c.StateDir,
		PluginRoots: append([]string{}, c.PluginRoots...),
		Service: serviceView{
			MaxWorkers:      c.Service.MaxWorkers,
			DedupeTTL:       formatDuration(c.Service.DedupeTTL),
			JobLogRetention: formatDuration(c.Service.JobLogRetention),
			AllowSymlinks:   c.Service.AllowSymlinks,
		},
		Plugins:   make(map[string]pluginView, len(c.Plugins)),
		Routes:    make([]routeView, 0, len(c.Routes)),
		Pipelines: rawData(c.Pipelines),
		API:       rawData(c.API),
		Webhooks:  rawData(c.Webhooks),
	}
	for name, p := range c.Plugins {
		conf := p.Config
		if conf == nil {
			conf = map[string]any{}
		}
		v.Plugins[name] = pluginView{
			Enabled:     p.Enabled,
			Parallelism: p.Parallelism,
			Retry:       retryView{MaxAttempts: p.Retry.MaxAttempts, BackoffBase: formatDuration(p.Retry.BackoffBase)},
			Timeouts: timeoutsView{
				Poll:   formatDuration(p.Timeouts.Poll),
				Handle: formatDuration(p.Timeouts.Handle),
				Health: formatDuration(p.Timeouts.Health),
				Init:   formatDuration(p.Timeouts.Init),
			},
			Config:    conf,
			Schedules: rawData(p.Schedules),
		}
	}
	for _, r := range c.Routes {
		v.Routes = append(v.Routes, routeView(r))
	}
	return v
}

func rawData(n *yaml.Node) any {
	if n == nil {
		return nil
	}
	return toData(n, "", func(*yaml.Node, string, string) {})
}
