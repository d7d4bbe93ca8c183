package views

import (
	"context"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// HealthUnknown is the health of a plugin that never ran init or a health
// check.
const HealthUnknown events.HealthStatus = "unknown"

// PluginHealth is a plugin's health as the plugin_health projection holds
// it: its newest init and its newest health check, and what they add up to.
type PluginHealth struct {
	Plugin string `json:"plugin"`
	// Status is unhealthy when the newest init failed, or when the newest
	// health check (newer than the newest init) found it unhealthy; healthy
	// when the newer of the two succeeded; unknown when neither ran.
	Status events.HealthStatus `json:"status"`
	// Summary says it in a few words: "healthy", "unhealthy: init failed:
	// exit 1", "not checked".
	Summary   string       `json:"summary"`
	Init      *InitState   `json:"init,omitempty"`
	LastCheck *HealthCheck `json:"last_check,omitempty"`
}

// InitState is how a plugin's newest init went.
type InitState struct {
	Status     string `json:"status"` // initialized | init_failed
	ConfigHash string `json:"config_hash"`
	Version    string `json:"version,omitempty"`
	Error      string `json:"error,omitempty"`
	At         string `json:"at"`
	seq        int64
}

// HealthCheck is a plugin's newest health check.
type HealthCheck struct {
	Status  events.HealthStatus `json:"status"`
	Message string              `json:"message,omitempty"`
	At      string              `json:"at"`
	seq     int64
}

// PluginHealthSet is the health of every plugin the projection knows, by
// name.
type PluginHealthSet map[string]PluginHealth

// Of returns plugin's health; unknown when nothing ran for it.
func (s PluginHealthSet) Of(plugin string) PluginHealth {
	if h, ok := s[plugin]; ok {
		return h
	}
	return PluginHealth{Plugin: plugin, Status: HealthUnknown, Summary: "not checked"}
}

// ListPluginHealth reads the plugin_health projection.
func ListPluginHealth(ctx context.Context, l *ledger.Ledger) (set PluginHealthSet, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		set, err = readPluginHealth(conn)
		return err
	})
	return set, err
}

func readPluginHealth(conn *sqlite.Conn) (PluginHealthSet, error) {
	set := PluginHealthSet{}
	err := queries.ListPluginHealth(conn, func(r queries.ListPluginHealthRow) error {
		h := PluginHealth{Plugin: r.PluginName}
		if r.InitStatus != nil {
			h.Init = &InitState{Status: *r.InitStatus, ConfigHash: deref(r.InitConfigHash), Version: deref(r.InitVersion),
				Error: deref(r.InitError), At: deref(r.InitAt), seq: derefInt(r.InitSeq)}
		}
		if r.HealthStatus != nil {
			h.LastCheck = &HealthCheck{Status: events.HealthStatus(*r.HealthStatus), Message: deref(r.HealthMessage),
				At: deref(r.HealthAt), seq: derefInt(r.HealthSeq)}
		}
		h.Status, h.Summary = h.judge()
		set[r.PluginName] = h
		return nil
	})
	return set, err
}

// judge adds the newest init and health check up to a status and summary.
func (h PluginHealth) judge() (events.HealthStatus, string) {
	initFailed := h.Init != nil && h.Init.Status == "init_failed"
	switch {
	case initFailed:
		return events.Unhealthy, "unhealthy: init failed: " + h.Init.Error
	case h.LastCheck != nil && (h.Init == nil || h.LastCheck.seq > h.Init.seq):
		if h.LastCheck.Status == events.Unhealthy {
			return events.Unhealthy, "unhealthy: " + h.LastCheck.Message
		}
		return events.Healthy, string(h.LastCheck.Status)
	case h.Init != nil:
		return events.Healthy, "healthy (initialized)"
	}
	return HealthUnknown, "not checked"
}

func derefInt(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}
