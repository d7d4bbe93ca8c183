package events

// PluginHealthStream is the stream of one plugin's init runs and health
// checks. It is a sibling of PluginStream, not the same stream: the newest
// event of PluginStream is the plugin's state, which the next job receives.
func PluginHealthStream(plugin string) string { return "plugin/" + plugin + "/health" }

// PluginFromHealthStream returns the plugin of a health stream, or "".
func PluginFromHealthStream(stream string) string {
	const prefix, suffix = "plugin/", "/health"
	if len(stream) <= len(prefix)+len(suffix) || stream[:len(prefix)] != prefix || stream[len(stream)-len(suffix):] != suffix {
		return ""
	}
	return stream[len(prefix) : len(stream)-len(suffix)]
}

// Plugin lifecycle event types.
const (
	// PluginInitialized: the plugin's init command succeeded for a config.
	PluginInitialized = "plugin.initialized"
	// PluginInitFailed: the plugin's init command failed for a config; the
	// plugin is unhealthy until an init succeeds.
	PluginInitFailed = "plugin.init_failed"
	// PluginHealthChecked: the plugin's health command ran on demand.
	PluginHealthChecked = "plugin.health_checked"
)

// HealthStatus is what a health check found.
type HealthStatus string

// Health statuses.
const (
	Healthy   HealthStatus = "healthy"
	Unhealthy HealthStatus = "unhealthy"
)

// InitializedData is the data of plugin.initialized. It holds the hash of
// the plugin's config, never the values (they may be secrets).
type InitializedData struct {
	ConfigHash string `json:"config_hash"`
	Version    string `json:"version"` // the manifest's version
	RunID      string `json:"run_id"`  // the job_id the init request carried
	DurationMS int64  `json:"duration_ms"`
}

// InitFailedData is the data of plugin.init_failed.
type InitFailedData struct {
	ConfigHash string  `json:"config_hash"`
	Version    string  `json:"version"`
	RunID      string  `json:"run_id"`
	Error      string  `json:"error"`
	Outcome    Outcome `json:"outcome"` // error, protocol_error or timeout
	ExitCode   int     `json:"exit_code"`
	Stderr     string  `json:"stderr,omitempty"` // its last 2 KiB
	DurationMS int64   `json:"duration_ms"`
}

// HealthCheckedData is the data of plugin.health_checked.
type HealthCheckedData struct {
	Status     HealthStatus `json:"status"`
	Message    string       `json:"message,omitempty"`
	Outcome    Outcome      `json:"outcome"`
	RunID      string       `json:"run_id"`
	DurationMS int64        `json:"duration_ms"`
}
