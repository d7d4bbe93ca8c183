// Package pipeline compiles the pipelines: section of a config (the DSL of
// routing-and-orchestration.md) into graphs of nodes, and holds the pure
// rules the runtime applies along them: if conditions, with templates and
// baggage claims, and the Stepper that moves a run along its graph within
// one decision. It runs nothing and reads no ledger: the write side
// (commands) is the Stepper's Host.
package pipeline

import (
	"encoding/json"
	"regexp"
	"time"
)

// Execution modes.
const (
	ModeAsync       = "async"
	ModeSynchronous = "synchronous"
)

// Defaults.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultMaxDepth = 20
)

// The event types the runtime makes for a step's input (what its on:
// may name besides the event types plugins emit).
const (
	EventRun           = "ductile.pipeline"       // the first step of a run from the API or CLI
	EventStepSucceeded = "ductile.step.succeeded" // after a step that emitted no event
	EventJoin          = "ductile.join"           // a join step
)

// Node kinds.
const (
	// KindUses runs a plugin command as a job.
	KindUses = "uses"
	// KindSplit runs no job: entering it enters every branch at once; the
	// node after it (Join) runs once every branch is terminal.
	KindSplit = "split"
)

// Set is the compiled pipelines of one config.
type Set struct {
	Pipelines map[string]*Pipeline `json:"pipelines"` // by name

	byEvent map[string][]*Pipeline     // on → pipelines, sorted by name
	byHook  map[HookSignal][]*Pipeline // on-hook → pipelines, sorted by name
	called  map[string]bool            // the pipelines another one calls (Compile only)
}

// Pipeline is one compiled pipeline. Calls are inlined, so a pipeline's
// nodes are all it runs. Hash identifies this compiled version: a run
// records it, and finishes on it across reloads.
type Pipeline struct {
	Name          string           `json:"name"`
	On            string           `json:"on,omitempty"`      // the event type that starts a run
	OnHook        HookSignal       `json:"on_hook,omitempty"` // HookSignals
	ExecutionMode string           `json:"execution_mode"`    // async | synchronous
	Timeout       time.Duration    `json:"timeout"`           // how long a synchronous caller waits
	MaxDepth      int              `json:"max_depth"`
	Entry         string           `json:"entry"` // the first node
	Nodes         map[string]*Node `json:"nodes"`
	Hash          string           `json:"hash"` // blake3:<hex> of the compiled form
	File          string           `json:"file,omitempty"`
	Line          int              `json:"line,omitempty"`
}

// Node is one step of a compiled pipeline.
type Node struct {
	// ID is unique in the pipeline: the step's id, or one the compiler
	// derives from its place ("delivery.1", "processing/download" for a
	// step of a called pipeline).
	ID   string `json:"id"`
	Kind string `json:"kind"` // uses | split
	// Plugin and Command are what a uses node runs.
	Plugin  string `json:"plugin,omitempty"`
	Command string `json:"command,omitempty"`
	// On, when set, gates the node on the type of the event it is entered
	// with (the event its predecessor emitted): any other type bypasses it
	// as a false If does. Checked before If.
	On []string `json:"on,omitempty"`
	// If, when set, gates the node: false bypasses it (for a split, the
	// whole split) to Next with the same input.
	If *Condition `json:"if,omitempty"`
	// With remaps the input payload: each value a template over payload.*
	// and context.* ("{payload.url}"), or a literal.
	With map[string]json.RawMessage `json:"with,omitempty"`
	// Baggage are the durable context claims the node makes when entered.
	Baggage []Claim `json:"baggage,omitempty"`
	// Branches are a split's branch entry nodes, in order.
	Branches []string `json:"branches,omitempty"`
	// ContinueOnError lets a split's join run when a branch failed.
	ContinueOnError bool `json:"continue_on_error,omitempty"`
	// Next is the node after this one in its sequence ("": the end of its
	// branch, or of the pipeline). For a split, Next is its join.
	Next string `json:"next,omitempty"`
	// Skip, when set, is where a false If (or an On the event does not
	// match) goes instead of Next: the node after the call or steps: group
	// this node is the first of (the gate was written on the group). ""
	// with a gate means Next.
	Skip string `json:"skip,omitempty"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// Claim is one baggage claim: the value at From (payload.x or context.y)
// becomes the durable context path Path; a bulk claim (Namespace set)
// imports the object at From under context.<Namespace>.
type Claim struct {
	Path      string `json:"path,omitempty"`
	From      string `json:"from"`
	Namespace string `json:"namespace,omitempty"`
}

// Condition is a compiled if: one operator over a path, or all/any/not of
// conditions.
type Condition struct {
	Op    string          `json:"op"`              // exists eq neq in gt gte lt lte contains startswith endswith regex all any not
	Path  string          `json:"path,omitempty"`  // payload.x | context.y | config.z
	Value json.RawMessage `json:"value,omitempty"` // the operand
	Of    []*Condition    `json:"of,omitempty"`    // for all, any, not

	re *regexp.Regexp // the compiled regex operand (compiled by the compiler, or UnmarshalJSON)
}
