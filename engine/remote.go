package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
)

// ErrUnknownWorker means a worker asked for work before it registered, or
// for plugins it did not register.
var ErrUnknownWorker = errors.New("unknown worker")

// ErrWorkerNameTaken means a worker name is bound to another API token:
// the one that first registered it, while it is configured.
var ErrWorkerNameTaken = errors.New("worker name taken")

// WorkerNameTakenError is the answer to a token that registers, claims or
// reports under a worker name another token registered (HTTP 409, code
// worker_name_taken). It unwraps to ErrWorkerNameTaken.
type WorkerNameTakenError struct {
	Name, Token string // the worker's name and the token it is bound to
}

func (e *WorkerNameTakenError) Error() string {
	return fmt.Sprintf("worker name %q is bound to the token %q, which registered it first", e.Name, e.Token)
}

func (e *WorkerNameTakenError) Unwrap() error { return ErrWorkerNameTaken }

// StaleFenceError is the answer to a remote worker that sent a completion,
// failure, renewal or log batch with a fence that no longer holds the job:
// what it sent was recorded as job.superseded and not applied (HTTP 409,
// code stale_fence). It unwraps to commands.ErrStaleFence.
type StaleFenceError struct {
	*commands.StaleFenceError
}

func (e *StaleFenceError) Unwrap() error { return e.StaleFenceError }

// staleFence turns the commands' stale fence error into the Engine's.
func staleFence(err error) error {
	var stale *commands.StaleFenceError
	if errors.As(err, &stale) {
		return &StaleFenceError{stale}
	}
	return err
}

// RegisterWorker records a worker host's registration (worker.registered
// on its stream): who it is and the plugins it serves with what their
// manifests declare. A plugin whose config says runs_on: remote or any
// need not be installed here: the Engine resolves it from the
// registrations.
//
// w.Token, the API token registering it, binds the name: while that token
// is configured, a registration under the name by another token is a
// *WorkerNameTakenError (decided against the stream's version, so two
// tokens racing for a new name cannot both get it).
func (e *Engine) RegisterWorker(ctx context.Context, w events.WorkerRegisteredData) error {
	if err := checkRegistration(w); err != nil {
		return err
	}
	stream := events.WorkerStream(w.Name)
	return e.fleet.register(w, func() error {
		for try := 1; ; try++ {
			err := e.appendRegistration(ctx, stream, w)
			if err == nil {
				return nil
			}
			if !errors.Is(err, ledger.ErrVersionConflict) || try == 3 {
				return fmt.Errorf("register worker %s: %w", w.Name, err)
			}
			// Another registration under this name came first: decide
			// again against it.
		}
	})
}

// appendRegistration appends w to stream, expecting the version whose
// registration it checked the name's binding against (any version when
// that registration is w's token's already).
func (e *Engine) appendRegistration(ctx context.Context, stream string, w events.WorkerRegisteredData) error {
	last, found, err := e.ledger.LastEvent(ctx, stream)
	if err != nil {
		return err
	}
	expected := int64(0)
	if found {
		expected = last.Version
		var prev events.WorkerRegisteredData
		if last.Type == events.WorkerRegistered && json.Unmarshal(last.Data, &prev) == nil {
			if err := e.boundTo(w.Name, prev.Token, w.Token); err != nil {
				return err
			}
			if w.Token == "" || prev.Token == w.Token {
				expected = ledger.AnyVersion // bound to this token already, or binding nothing: nothing to race for
			}
		}
	}
	_, err = e.ledger.Append(ctx, ledger.NewEvent{Stream: stream, ExpectedVersion: expected,
		Type: events.WorkerRegistered, Data: w, Meta: ledger.Meta{Actor: events.ActorWorker}})
	return err
}

// boundTo refuses token acting as worker name when the name is bound to
// another token (bound, the one that registered it) that is still
// configured and is not an operator's (scope *: it may act as any worker,
// so it binds no name). Without a token on either side nothing is bound.
func (e *Engine) boundTo(name, bound, token string) error {
	if bound == "" || token == "" || bound == token {
		return nil
	}
	if e.auth != nil && e.auth.Len() > 0 {
		i := slices.IndexFunc(e.auth.Tokens(), func(t auth.TokenInfo) bool { return t.Name == bound })
		if i < 0 || slices.Contains(e.auth.Tokens()[i].Scopes, auth.All) {
			return nil // the token was revoked, or is an operator's: the name is free
		}
	}
	return &WorkerNameTakenError{Name: name, Token: bound}
}

// CheckWorkerToken refuses token acting as worker name (a claim, renewal,
// log batch, progress or completion) when another token registered the
// name (a *WorkerNameTakenError). A worker not registered passes: the
// claim refuses it.
func (e *Engine) CheckWorkerToken(ctx context.Context, name, token string) error {
	workers, err := e.fleet.Workers(ctx, e.ledger)
	if err != nil {
		return err
	}
	w, ok := workers[name]
	if !ok {
		return nil
	}
	return e.boundTo(name, w.Token, token)
}

// checkRegistration refuses a registration the daemon could not use.
func checkRegistration(w events.WorkerRegisteredData) error {
	if w.Name == "" || strings.ContainsAny(w.Name, " \t\n/") || len(w.Name) > 128 {
		return fmt.Errorf("%w: register worker: name %q must be 1-128 characters without spaces or slashes (ductile worker --name)", commands.ErrInvalidCommand, w.Name)
	}
	seen := map[string]bool{}
	for _, p := range w.Plugins {
		if p.Name == "" || seen[p.Name] || len(p.Commands) == 0 {
			return fmt.Errorf("%w: register worker %s: plugin %q is unnamed, listed twice or has no commands", commands.ErrInvalidCommand, w.Name, p.Name)
		}
		seen[p.Name] = true
		for _, fo := range p.FactOutputs {
			if fo.From != "state_updates" || fo.FactType == "" {
				return fmt.Errorf("%w: register worker %s: plugin %s: a fact_outputs rule needs a fact_type and from: state_updates, got from %q", commands.ErrInvalidCommand, w.Name, p.Name, fo.From)
			}
		}
	}
	return nil
}

// Workers are the registrations of every worker, by name, as last recorded.
func (e *Engine) Workers(ctx context.Context) (map[string]events.WorkerRegisteredData, error) {
	return e.fleet.Workers(ctx, e.ledger)
}

// remotePlugin is plugin name as a registered worker serves it
// (RegisteredPlugin).
func (e *Engine) remotePlugin(name string) (events.WorkerPlugin, bool) {
	workers, err := e.fleet.Workers(context.Background(), e.ledger)
	if err != nil {
		return events.WorkerPlugin{}, false
	}
	return RegisteredPlugin(workers, name)
}

// RegisteredPlugin is plugin name as workers (registrations by worker
// name) serve it: the registration of the worker whose name sorts first,
// when several do.
func RegisteredPlugin(workers map[string]events.WorkerRegisteredData, name string) (events.WorkerPlugin, bool) {
	for _, n := range slices.Sorted(maps.Keys(workers)) {
		for _, p := range workers[n].Plugins {
			if p.Name == name {
				return p, true
			}
		}
	}
	return events.WorkerPlugin{}, false
}

// remoteCapacity is plugin's parallelism cap for remote claims: its config
// parallelism (0: no cap but the workers' own), 1 if the manifest, here or
// as a worker registered it, says it is not concurrency-safe.
func (e *Engine) remoteCapacity(plugin string) int {
	capacity := e.config.Plugin(plugin).Parallelism
	serial := false
	if p, ok := e.localPlugin(plugin); ok {
		serial = !p.Manifest.ConcurrencySafe
	} else if p, ok := e.remotePlugin(plugin); ok {
		serial = !p.ConcurrencySafe
	}
	if serial {
		return 1
	}
	return capacity // 0: no cap
}

// localPlugin is plugin as loaded here, if it is.
func (e *Engine) localPlugin(name string) (*pluginhost.Plugin, bool) {
	if e.plugins == nil {
		return nil, false
	}
	return e.plugins.Get(name)
}

// WorkerPluginOf is plugin p as a worker registers it: its manifest's
// version, commands, concurrency_safe and fact_outputs.
func WorkerPluginOf(p *pluginhost.Plugin) events.WorkerPlugin {
	m := p.Manifest
	wp := events.WorkerPlugin{Name: p.Name, Version: m.Version, ConcurrencySafe: m.ConcurrencySafe, Commands: []events.AppliedCommand{}}
	for _, c := range m.Commands {
		wp.Commands = append(wp.Commands, events.AppliedCommand{Name: c.Name, Type: string(c.Type)})
	}
	for _, fo := range m.FactOutputs {
		wp.FactOutputs = append(wp.FactOutputs, events.WorkerFactOutput{Command: fo.When.Command, From: fo.From, FactType: fo.FactType,
			CompatibilityView: string(fo.CompatibilityView)})
	}
	return wp
}
