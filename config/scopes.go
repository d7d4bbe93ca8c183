package config

// Scope is a permission an API token grants (spec §9.4): what a token's
// scopes file lists, and what a route of the API needs (package auth,
// which names these under its own names, decides). A write scope implies
// its read scope, and ScopeAll grants everything.
type Scope string

// The scopes: the one list, which package auth names too.
const (
	ScopePluginRO Scope = "plugin:ro"
	ScopePluginRW Scope = "plugin:rw"
	ScopeJobsRO   Scope = "jobs:ro"
	ScopeJobsRW   Scope = "jobs:rw"
	ScopeEventsRO Scope = "events:ro"
	ScopeEventsRW Scope = "events:rw"
	// ScopeWorker grants the routes a remote worker host calls (register,
	// claim, renew, logs, control, complete, fail) and nothing else; it
	// cannot be limited to named plugins (a worker claims only the plugins
	// it registered and the config places runs_on: remote or any).
	ScopeWorker Scope = "worker"
	// ScopeTopicsRO reads the topic exchange (messages, conversations,
	// checks, inspections); ScopeTopicsRW also publishes. A topic worker
	// claims, renews and finishes with ScopeWorker.
	ScopeTopicsRO Scope = "topics:ro"
	ScopeTopicsRW Scope = "topics:rw"
	ScopeAll      Scope = "*"
)

// Scopes are the valid scopes, in the order messages list them.
var Scopes = []Scope{ScopePluginRO, ScopePluginRW, ScopeJobsRO, ScopeJobsRW, ScopeEventsRO, ScopeEventsRW, ScopeWorker, ScopeTopicsRO, ScopeTopicsRW, ScopeAll}

// ValidScopes are the names of Scopes: what a scopes file may grant.
var ValidScopes = scopeNames(Scopes)

func scopeNames(scopes []Scope) []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}
