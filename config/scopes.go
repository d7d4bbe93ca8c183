package config

import (
	"regexp"
	"strings"
)

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
	// claim, renew, logs, control, complete, fail) and nothing else, for
	// every plugin; WorkerPluginScope limits it to named plugins.
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

// workerPluginPrefix begins a worker scope limited to one plugin
// (WorkerPluginScope).
const workerPluginPrefix = "worker:plugin="

// workerPluginName is what may follow workerPluginPrefix: a plugin name
// (the manifest's rule).
var workerPluginName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// WorkerPluginScope is the scope "worker:plugin=NAME": the worker routes,
// for plugin NAME only (register it, claim and complete its jobs). A token
// may list several; with ScopeWorker or ScopeAll as well it is not limited.
func WorkerPluginScope(plugin string) Scope { return Scope(workerPluginPrefix + plugin) }

// WorkerPlugin is the plugin a worker:plugin=NAME scope names, if s is one.
func WorkerPlugin(s Scope) (string, bool) {
	name, ok := strings.CutPrefix(string(s), workerPluginPrefix)
	return name, ok && workerPluginName.MatchString(name)
}

// ValidScope reports whether a scopes file may grant s: one of Scopes, or
// worker:plugin=NAME with NAME a valid plugin name.
func ValidScope(s string) bool {
	for _, v := range Scopes {
		if string(v) == s {
			return true
		}
	}
	_, ok := WorkerPlugin(Scope(s))
	return ok
}

// ScopesHelp lists what a scopes file may grant, for messages.
func ScopesHelp() string {
	return strings.Join(ValidScopes, ", ") + ", worker:plugin=NAME"
}
