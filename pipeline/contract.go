package pipeline

import (
	"encoding/json"

	"github.com/ductile/ductile/config"
)

// The functions below are the contract between the compiler and the
// runtime.

// Compile compiles cfg.Pipelines. check, when not nil, says whether a
// plugin command exists (nil error) or why not; it is called for every
// uses node. Errors are a *config.ValidationError naming the file, line,
// pipeline, step and the fix. A config without pipelines gives an empty
// Set.
func Compile(cfg *config.Config, check func(plugin, command string) error) (*Set, error) {
	return compile(cfg, check)
}

// Triggered returns the pipelines whose on is eventType, by name.
func (s *Set) Triggered(eventType string) []*Pipeline {
	if s.byEvent == nil {
		return s.scan(eventType, func(p *Pipeline) string { return p.On })
	}
	return s.byEvent[eventType]
}

// Hooked returns the pipelines whose on-hook is signal, by name.
func (s *Set) Hooked(signal HookSignal) []*Pipeline {
	if s.byHook == nil {
		return s.scan(string(signal), func(p *Pipeline) string { return string(p.OnHook) })
	}
	return s.byHook[signal]
}

// Scope is what a condition, a template and a claim read: the input
// event's payload, the inherited context and the node's plugin config, each
// a JSON object (nil: {}).
// Each document is decoded once per Scope, when a path of it is first
// read: a Scope made by NewScope shares that across Eval, Input and Accrete
// (and its copies); a literal Scope, within one call. Not for concurrent use.
type Scope struct {
	Payload json.RawMessage
	Context json.RawMessage
	Config  json.RawMessage

	decoded *decodedScope
}

// NewScope is a Scope of these documents whose decoded forms are shared by
// every call given it (or a copy of it).
func NewScope(payload, context, config json.RawMessage) Scope {
	return Scope{Payload: payload, Context: context, Config: config, decoded: &decodedScope{}}
}

// Eval says whether the condition holds in scope. An error is a condition
// that cannot be evaluated (a regex that does not compile is a compile
// error, not this).
func (c *Condition) Eval(scope Scope) (bool, error) { return c.eval(scope.withCache()) }

// Input is the payload the node's job receives: the incoming payload, or,
// when the node has with:, the object its templates make from scope.
func (n *Node) Input(scope Scope) (json.RawMessage, error) { return n.input(scope.withCache()) }

// Accrete returns the context after the node's baggage claims, evaluated
// against scope (payload.* and the inherited context.*): a new path is
// added, the same value again is fine, a different value for an inherited
// path is a *BaggageError. Without claims it returns scope.Context as is.
func (n *Node) Accrete(scope Scope) (json.RawMessage, error) { return n.accrete(scope.withCache()) }

// BaggageError is a claim that would rewrite an inherited context path.
type BaggageError struct {
	Node string
	Path string
	Old  json.RawMessage
	New  json.RawMessage
}

func (e *BaggageError) Error() string {
	return "step " + e.Node + ": baggage claim would change context." + e.Path + " from " + string(e.Old) + " to " + string(e.New) + ": inherited baggage is immutable (claim a new path instead)"
}
