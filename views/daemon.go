package views

import "github.com/ductile/ductile/ledger"

// APIState is whether the daemon serves its HTTP API, as the daemon
// reports it (/healthz of the webhook listener, system status).
type APIState struct {
	Enabled bool `json:"enabled"` // api.enabled
	// Listening is the address it serves on.
	Listening string `json:"listening,omitempty"`
	// Off says why it serves none while enabled (its address was taken).
	Off string `json:"off,omitempty"`
}

// Down reports whether the API should serve and does not.
func (a APIState) Down() bool { return a.Enabled && a.Listening == "" }

// DaemonHealth is what a /healthz adds up to from the daemon's own state:
// "unavailable" while the ledger's writes fail (nothing can be accepted),
// "degraded" while its API should serve and does not, else "ok".
func DaemonHealth(writes ledger.WriteHealth, api *APIState) string {
	switch {
	case writes.Failing:
		return "unavailable"
	case api != nil && api.Down():
		return "degraded"
	}
	return "ok"
}
