// Package auth decides who may call the HTTP API: bearer tokens from the
// config's tokens file, each with its scopes (spec §9.4), and the named
// secrets webhooks verify their signatures with.
package auth

import (
	"errors"
	"slices"
	"strings"

	"github.com/ductile/ductile/config"
)

// Scope is a permission a token grants: config.Scope, the one list of
// scopes, which the tokens file is checked against.
type Scope = config.Scope

// The scopes (spec §9.4), config's under the names routes use; a write
// scope implies its read scope, and All grants everything.
const (
	PluginRO = config.ScopePluginRO
	PluginRW = config.ScopePluginRW
	JobsRO   = config.ScopeJobsRO
	JobsRW   = config.ScopeJobsRW
	EventsRO = config.ScopeEventsRO
	EventsRW = config.ScopeEventsRW
	Worker   = config.ScopeWorker // the worker routes only: no read scope comes with it
	TopicsRO = config.ScopeTopicsRO
	TopicsRW = config.ScopeTopicsRW
	All      = config.ScopeAll
)

// Scopes are the valid scopes (config.Scopes).
var Scopes = config.Scopes

var (
	// ErrUnauthorized means the request has no token, or one no entry
	// holds (HTTP 401).
	ErrUnauthorized = errors.New("missing or invalid bearer token")
	// ErrForbidden means the token is valid but lacks the scope (HTTP 403).
	ErrForbidden = errors.New("the token does not grant this scope")
)

// Guard checks a request's Authorization header against the scope the
// route needs, and names the token that passed.
type Guard interface {
	Check(authorization string, need Scope) (token string, err error)
}

// Secrets resolves the named secrets of the tokens file (webhook
// secret_ref).
type Secrets interface {
	Secret(name string) ([]byte, bool)
}

// Grants reports whether granted covers need: All covers every scope, a
// write scope covers its read scope, and worker:plugin=NAME covers Worker
// (for that plugin only: WorkerPlugins).
func Grants(granted []Scope, need Scope) bool {
	for _, g := range granted {
		_, workerOfPlugin := config.WorkerPlugin(g)
		switch {
		case g == All, g == need:
			return true
		case need == Worker && workerOfPlugin:
			return true
		case strings.HasSuffix(string(g), ":rw") && Scope(strings.TrimSuffix(string(g), ":rw")+":ro") == need:
			return true
		}
	}
	return false
}

// WorkerPlugins are the plugins granted limits the worker routes to: the
// names of its worker:plugin=NAME scopes, with limited true; limited is
// false when granted has Worker or All (every plugin) or no such scope.
func WorkerPlugins(granted []Scope) (plugins []string, limited bool) {
	for _, g := range granted {
		if g == Worker || g == All {
			return nil, false
		}
		if name, ok := config.WorkerPlugin(g); ok && !slices.Contains(plugins, name) {
			plugins = append(plugins, name)
		}
	}
	return plugins, len(plugins) > 0
}

// WorkerLimiter is a Guard that also says which plugins a token's worker
// scope is limited to (auth.Registry is one).
type WorkerLimiter interface {
	WorkerPlugins(authorization string) (plugins []string, limited bool)
}
