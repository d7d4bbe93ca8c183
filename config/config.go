package config

import (
	"fmt"
	"runtime"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/schedule"
)

// Defaults applied to keys the config leaves out.
const (
	DefaultDedupeTTL       = 24 * time.Hour
	DefaultJobLogRetention = 30 * 24 * time.Hour
	DefaultMaxAttempts     = 4
	DefaultBackoffBase     = 30 * time.Second
	DefaultPollTimeout     = 60 * time.Second
	DefaultHandleTimeout   = 120 * time.Second
	DefaultHealthTimeout   = 10 * time.Second
	DefaultInitTimeout     = 30 * time.Second
	DefaultRouteCommand    = "handle"
	DefaultMaxRouteDepth   = 20
	DefaultMaxHookDepth    = 3
	// DefaultLeasePeriod is service.lease_period left out: how long a
	// remote worker's claim or renewal holds a job (engine.DefaultLeasePeriod).
	DefaultLeasePeriod = 30 * time.Second
	// MinLeasePeriod and MaxLeasePeriod bound service.lease_period.
	MinLeasePeriod = time.Second
	MaxLeasePeriod = time.Hour
	// MinDefaultWorkers is the floor of the default worker pool,
	// max(MinDefaultWorkers, NumCPU-1). The spec's max(1, NumCPU-1) is one
	// worker on a two-core machine, where one hung plugin would stall
	// every schedule for its whole timeout; plugins mostly wait on the
	// network or disks, not the CPU.
	MinDefaultWorkers = 4
)

// Config is the merged, validated configuration. Treat it as read-only once
// loaded: reload builds a new one.
type Config struct {
	// Source is the absolute path of the file Load read; "" for Default.
	Source string
	// Dir is the absolute directory of Source. Relative state_dir and
	// plugin_roots entries have already been resolved against it.
	Dir string
	// Files lists every file loaded, absolute, in load order: the config
	// file first, then each include (and its includes) in turn.
	Files []string
	// FileHashes holds the BLAKE3 hash of each of Files as read, in the
	// same order (config.applied records them).
	FileHashes []FileHash

	// StateDir is where the ledger and lock file live; "" when the config
	// does not say, and the caller picks.
	StateDir string
	// PluginRoots are the directories scanned for plugins, in order; the
	// first root holding a plugin name wins. Absolute, ~ expanded.
	PluginRoots []string
	Service     Service
	// Plugins holds the plugins the config mentions, with defaults filled
	// in. A discovered plugin need not appear here: use Plugin(name).
	Plugins map[string]PluginConfig
	// Routes are concatenated across files in load order.
	Routes []Route
	// Topics are the topic exchange's per-topic settings (topics:), by
	// topic name; a topic not named has DefaultTopic. Use Topic(name).
	Topics map[string]TopicConfig

	// WebhookSettings is the webhooks: section, validated (config/webhooks.go).
	WebhookSettings WebhookSettings

	// Pipelines, API and Webhooks are kept as parsed YAML (nil when absent)
	// for the features that own them (Webhooks is also WebhookSettings). Pipelines lists concatenate across files like Routes. Scalars
	// filled from ${VAR} are tagged !!str. Use Position for error messages.
	Pipelines *yaml.Node
	API       *yaml.Node
	Webhooks  *yaml.Node
	// APIServer is the HTTP API's settings, read from the api: section
	// (config/api.go); not Enabled without one.
	APIServer APIServer

	// Tokens are the API's bearer tokens (tokens: in the tokens file), in
	// the order written; Secrets the named secrets (secrets:) webhooks
	// verify signatures with. See tokens.go.
	Tokens  []Token
	Secrets map[string]string
	// IntegrityWarnings are the files .checksums lists that changed, or
	// that it does not list, where a change only warns (see integrity.go).
	IntegrityWarnings []FieldError

	origin       map[*yaml.Node]string     // display file of every node, for Position
	interpolated map[*yaml.Node]bool       // scalars that took a value from ${…}
	unset        []unsetVar                // placeholders left as written (LoadDeferred): see Unset
	pluginConfig map[string]*yaml.Node     // plugins.<name>.config as parsed, for Redacted
	pluginKeys   map[string]*yaml.Node     // the key of each plugins.<name>, for Check
	schedules    map[string]*scheduleNodes // where plugins.<name>.schedules was written
	routeNodes   []*yaml.Node              // the mapping of each of Routes, for Check
	fileKeys     map[string][]string       // the top-level keys of each of Files, for integrity tiers
	fileStats    map[string]fileStat       // mode and owner of each file read (Files, scopes files), for the permission checks
	webhookNodes []webhookNodes            // where each of WebhookSettings.Endpoints was written
}

// Service holds the settings of the core itself.
type Service struct {
	// MaxWorkers bounds the global worker pool; default
	// max(MinDefaultWorkers, NumCPU-1).
	MaxWorkers int
	// DedupeTTL is the default dedupe window.
	DedupeTTL time.Duration
	// JobLogRetention is how long job logs are kept.
	JobLogRetention time.Duration
	// AllowSymlinks permits symlinks in plugin paths.
	AllowSymlinks bool
	// MaxRouteDepth is the deepest a routed job may be (its root is 0):
	// a route that would make a deeper one is dropped.
	MaxRouteDepth int
	// MaxHookDepth is how many lifecycle hooks may chain (a hook's run's
	// job firing a hook…): past it no hook fires.
	MaxHookDepth int
	// LeasePeriod is how long a remote worker's claim or renewal holds a
	// job (workers renew every third of it). Read when the daemon starts:
	// a reload that changes it warns that a restart is needed.
	LeasePeriod time.Duration
}

// PluginConfig is the operator's settings for one plugin.
type PluginConfig struct {
	Enabled bool
	// Parallelism caps concurrent jobs of this plugin; 0 means no cap
	// beyond Service.MaxWorkers.
	Parallelism int
	Retry       Retry
	Timeouts    Timeouts
	// MaxOutstandingPolls is the poll guard: how many poll jobs of the
	// plugin may be queued or running before the scheduler adds none.
	MaxOutstandingPolls int
	// CircuitBreaker guards the plugin's scheduled jobs (spec §5.8).
	CircuitBreaker CircuitBreaker
	// NotifyOnComplete makes the end of each of its jobs fire the on-hook
	// pipelines of the signal (job.completed, job.failed, job.timed_out).
	NotifyOnComplete bool
	// Config is passed to the plugin as is (never nil). Values filled from
	// ${VAR} are strings.
	Config map[string]any
	// Schedules are the plugin's schedule entries, validated, in the order
	// written; nil when none.
	Schedules []schedule.Entry
	// RunsOn is where the plugin's jobs run: RunsLocal (the default), RunsRemote
	// or RunsAny.
	RunsOn RunsOn
}

// RunsOn is where a plugin's jobs run (plugins.<name>.runs_on).
type RunsOn string

// Where a plugin's jobs run.
const (
	// RunsLocal: the daemon's own dispatcher runs them; remote workers may
	// not claim them.
	RunsLocal RunsOn = "local"
	// RunsRemote: only remote workers (ductile worker) claim them; the
	// plugin need not be installed on the daemon's machine.
	RunsRemote RunsOn = "remote"
	// RunsAny: both the dispatcher and remote workers take them.
	RunsAny RunsOn = "any"
)

// Local reports whether the daemon's own dispatcher runs the plugin's jobs.
func (r RunsOn) Local() bool { return r != RunsRemote }

// Remote reports whether remote workers may claim the plugin's jobs.
func (r RunsOn) Remote() bool { return r == RunsRemote || r == RunsAny }

// Retry is a plugin's retry policy.
type Retry struct {
	// MaxAttempts counts the first attempt: 4 means 1 + 3 retries.
	MaxAttempts int
	BackoffBase time.Duration
}

// Timeouts bounds each plugin command.
type Timeouts struct {
	Poll   time.Duration
	Handle time.Duration
	Health time.Duration
	Init   time.Duration
}

// For returns the timeout of command: commands other than poll, health and
// init use Handle.
func (t Timeouts) For(command string) time.Duration {
	switch command {
	case "poll":
		return t.Poll
	case "health":
		return t.Health
	case "init":
		return t.Init
	default:
		return t.Handle
	}
}

// Route sends events of EventType emitted by plugin From to Command of
// plugin To.
type Route struct {
	From      string
	EventType string
	To        string
	Command   string
}

// Default returns the configuration used when there is no config file: every
// default applied, no plugin roots (the caller adds the bundled one).
func Default() *Config {
	return &Config{
		PluginRoots: []string{},
		Service: Service{
			MaxWorkers:      max(MinDefaultWorkers, runtime.NumCPU()-1),
			DedupeTTL:       DefaultDedupeTTL,
			JobLogRetention: DefaultJobLogRetention,
			MaxRouteDepth:   DefaultMaxRouteDepth,
			MaxHookDepth:    DefaultMaxHookDepth,
			LeasePeriod:     DefaultLeasePeriod,
		},
		Plugins:         map[string]PluginConfig{},
		Routes:          []Route{},
		WebhookSettings: WebhookSettings{Listen: DefaultWebhookListen},
		APIServer:       DefaultAPIServer(),
	}
}

// DefaultTimeouts returns the spec's default command timeouts: poll 60s,
// handle 120s, health 10s, init 30s (any other command uses handle's). It
// is the one table of them: the plugin runner falls back to it too.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Poll:   DefaultPollTimeout,
		Handle: DefaultHandleTimeout,
		Health: DefaultHealthTimeout,
		Init:   DefaultInitTimeout,
	}
}

// DefaultPlugin returns the settings of a plugin the config does not mention.
func DefaultPlugin() PluginConfig {
	return PluginConfig{
		Enabled:             true,
		Retry:               Retry{MaxAttempts: DefaultMaxAttempts, BackoffBase: DefaultBackoffBase},
		Timeouts:            DefaultTimeouts(),
		MaxOutstandingPolls: DefaultMaxOutstandingPolls,
		CircuitBreaker:      DefaultCircuitBreaker(),
		Config:              map[string]any{},
	}
}

// defaultPlugin is what Plugin returns for every plugin the config does not
// mention, built once: the dispatcher asks per candidate job. It is never
// modified, and its Config map is shared by every caller.
var defaultPlugin = DefaultPlugin()

// Plugin returns the settings of plugin name, or DefaultPlugin's when the
// config does not mention it. The result is read-only like the Config: its
// Config map may be shared, so copy it before changing it.
func (c *Config) Plugin(name string) PluginConfig {
	if p, ok := c.Plugins[name]; ok {
		return p
	}
	return defaultPlugin
}

// Timeout returns how long command of plugin may run.
func (c *Config) Timeout(plugin, command string) time.Duration {
	return c.Plugin(plugin).Timeouts.For(command)
}

// Position returns "file:line" of n, a node inside Pipelines, API or
// Webhooks, so the features that validate those sections can point at the
// offending line. The file is relative to Dir when inside it.
func (c *Config) Position(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	if f, ok := c.origin[n]; ok {
		return fmt.Sprintf("%s:%d", f, n.Line)
	}
	return fmt.Sprintf("line %d", n.Line)
}
