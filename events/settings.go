package events

// Settings is the effective configuration a daemon decides with, as
// config.applied records it: every key with its default filled in, by the
// config file's own keys, and the content hash of every file read. Values
// that may be secret never enter it: a plugin's config: map, the
// pipelines, api and webhooks sections, the tokens' keys and the secrets
// are recorded by hash only, and schedule payloads are redacted. Package
// config builds it field by field, so a change to config's own types
// changes nothing stored.
type Settings struct {
	// Hash identifies the settings: the BLAKE3 hash of everything else but
	// Source and Files, so that the same settings loaded from a moved or
	// reformatted file keep their hash.
	Hash string `json:"hash"`
	// Source is the config file the daemon loaded; "" for the built-in
	// defaults.
	Source string     `json:"source"`
	Files  []FileHash `json:"files"`

	StateDir    string                    `json:"state_dir,omitempty"`
	PluginRoots []string                  `json:"plugin_roots"`
	Service     ServiceSettings           `json:"service"`
	Plugins     map[string]PluginSettings `json:"plugins"`
	Routes      []RouteSettings           `json:"routes"`
	// Tokens are the API tokens by name and scopes only.
	Tokens []TokenSettings `json:"tokens,omitempty"`
	// Sections holds the hash of each of pipelines, api and webhooks that
	// the config sets, and of the tokens' keys and the secrets.
	Sections map[string]string `json:"sections,omitempty"`
}

// FileHash is a config file and the BLAKE3 hash of the bytes read from it.
type FileHash struct {
	Path   string `json:"path"`
	BLAKE3 string `json:"blake3"`
}

// ServiceSettings are the settings of the service: section. Durations are
// as config show prints them.
type ServiceSettings struct {
	MaxWorkers      int    `json:"max_workers"`
	DedupeTTL       string `json:"dedupe_ttl"`
	JobLogRetention string `json:"job_log_retention"`
	AllowSymlinks   bool   `json:"allow_symlinks"`
	MaxRouteDepth   int    `json:"max_route_depth"`
	MaxHookDepth    int    `json:"max_hook_depth"`
	// LeasePeriod is service.lease_period; absent from settings recorded
	// before the key existed (30s then).
	LeasePeriod string `json:"lease_period,omitempty"`
}

// PluginSettings are one plugin's settings: its config: map by hash only.
type PluginSettings struct {
	Enabled             bool            `json:"enabled"`
	Parallelism         int             `json:"parallelism"`
	MaxOutstandingPolls int             `json:"max_outstanding_polls"`
	Retry               RetrySettings   `json:"retry"`
	Timeouts            TimeoutSettings `json:"timeouts"`
	CircuitBreaker      BreakerSettings `json:"circuit_breaker"`
	NotifyOnComplete    bool            `json:"notify_on_complete"`
	// ConfigHash is the hash of the plugin's config: map.
	ConfigHash string             `json:"config_hash"`
	Schedules  []ScheduleSettings `json:"schedules,omitempty"`
	// RunsOn is where its jobs run (local, remote, any); empty: local.
	RunsOn string `json:"runs_on,omitempty"`
}

// RetrySettings are a plugin's retry: settings.
type RetrySettings struct {
	MaxAttempts int    `json:"max_attempts"`
	BackoffBase string `json:"backoff_base"`
}

// TimeoutSettings are a plugin's timeouts: settings, one per command kind.
type TimeoutSettings struct {
	Poll   string `json:"poll"`
	Handle string `json:"handle"`
	Health string `json:"health"`
	Init   string `json:"init"`
}

// BreakerSettings are a plugin's circuit_breaker: settings.
type BreakerSettings struct {
	Enabled    bool   `json:"enabled"`
	Threshold  int    `json:"threshold"`
	ResetAfter string `json:"reset_after"`
}

// ScheduleSettings is one schedule entry with every default filled in: one
// of Every, Cron, At and After is set, and the lists only when not empty.
type ScheduleSettings struct {
	ID              string         `json:"id"`
	Command         string         `json:"command"`
	Payload         map[string]any `json:"payload,omitempty"`
	Every           string         `json:"every,omitempty"`
	Cron            string         `json:"cron,omitempty"`
	At              string         `json:"at,omitempty"`
	After           string         `json:"after,omitempty"`
	Jitter          string         `json:"jitter"`
	OnlyBetween     []string       `json:"only_between,omitempty"`
	PreferredWindow []string       `json:"preferred_window,omitempty"`
	NotOn           []string       `json:"not_on,omitempty"`
	Timezone        string         `json:"timezone"`
	CatchUp         string         `json:"catch_up"`
	IfRunning       string         `json:"if_running"`
}

// RouteSettings is one route: events of EventType from plugin From become
// jobs of To's Command.
type RouteSettings struct {
	From      string `json:"from"`
	EventType string `json:"event_type"`
	To        string `json:"to"`
	Command   string `json:"command"`
}

// TokenSettings is an API token as config.applied records it: no key, not
// even its hash (a short key is guessable from one).
type TokenSettings struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

// SettingChange is one setting whose value in a config differs from the
// applied one, by dotted path (plugins.echo.retry.max_attempts).
type SettingChange struct {
	Path    string `json:"path"`
	File    any    `json:"file"`    // nil: not set in the file
	Applied any    `json:"applied"` // nil: not in the applied settings
}
