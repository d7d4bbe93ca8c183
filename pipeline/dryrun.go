package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Outcomes of a step in a dry run.
const (
	DryRuns    = "runs"    // it would run (a split: its branches are entered)
	DrySkipped = "skipped" // its on does not list the event's type, or its if is false: it is bypassed
	DryDepends = "depends" // whether it runs depends on an earlier step's output
	DryFails   = "fails"   // it would fail at once (a baggage claim, a condition that cannot be evaluated)
)

// DryStep is what a dry run says of one step.
type DryStep struct {
	Node    string `json:"node"`
	Kind    string `json:"kind"`
	Plugin  string `json:"plugin,omitempty"`
	Command string `json:"command,omitempty"`
	// Depth is how many splits the step is inside.
	Depth   int    `json:"depth"`
	Outcome string `json:"outcome"`
	On      string `json:"on,omitempty"` // the event types it runs on, comma-separated
	If      string `json:"if,omitempty"`
	// Reason says why a step is skipped, depends or fails.
	Reason string `json:"reason,omitempty"`
	// Input is the payload its job would receive, when it is known;
	// InputFrom says what it depends on when it is not.
	Input     json.RawMessage `json:"input,omitempty"`
	InputFrom string          `json:"input_from,omitempty"`
	// Context is the known context its job would record; Pending the
	// context paths claimed from what is known only when it runs.
	Context json.RawMessage `json:"context"`
	Pending []string        `json:"pending,omitempty"`
}

// dryState is what flows into a step: the payload (when known, else what
// it depends on) and the context (its known part, and the paths that
// depend on outputs).
type dryState struct {
	event   string // the event's type; "" when it is not known (from says why)
	payload json.RawMessage
	from    string // "" when payload is known
	context json.RawMessage
	pending map[string]string // context path → what it depends on
}

// DryRun walks the pipeline from Entry without running anything: the first
// step's on, if, with and baggage are evaluated against the event (its
// type event, "" for ductile.pipeline, and payload); a later step's input
// is the output of the step before it, unknown here, so its on and what
// reads payload.* there are reported as depending on that output, while
// context.* and config.* (config gives a plugin's config) are evaluated.
func (p *Pipeline) DryRun(event string, payload json.RawMessage, config func(plugin string) json.RawMessage) ([]DryStep, error) {
	if event == "" {
		event = EventRun
	}
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	if !json.Valid(payload) {
		return nil, errors.New("dry run: the payload is not valid JSON")
	}
	if config == nil {
		config = func(string) json.RawMessage { return nil }
	}
	d := &dryRun{p: p, config: config}
	d.walk(p.Entry, dryState{event: event, payload: payload, context: json.RawMessage(`{}`), pending: map[string]string{}}, 0)
	return d.steps, nil
}

type dryRun struct {
	p      *Pipeline
	config func(plugin string) json.RawMessage
	steps  []DryStep
}

// walk runs the sequence from id; it returns the state after its last
// step, and false when a step on it fails (what follows does not run).
func (d *dryRun) walk(id string, s dryState, depth int) (dryState, bool) {
	for id != "" {
		n := d.p.Nodes[id]
		if n == nil {
			return s, true
		}
		step := DryStep{Node: n.ID, Kind: n.Kind, Plugin: n.Plugin, Command: n.Command, Depth: depth, Outcome: DryRuns}
		scope := Scope{Payload: s.payload, Context: s.context, Config: d.config(n.Plugin)}
		if len(n.On) > 0 {
			step.On = strings.Join(n.On, ", ")
			switch {
			case s.event == "":
				step.Outcome, step.Reason = DryDepends, "its on depends on the type of "+s.from
			case !slices.Contains(n.On, s.event):
				step.Outcome, step.Reason = DrySkipped, "the event is "+s.event+", not "+strings.Join(n.On, " or ")+" (on:): the step is bypassed with the same input"
			}
		}
		if n.If != nil {
			step.If = n.If.String()
		}
		if n.If != nil && step.Outcome != DrySkipped {
			// Both gates must pass: a false if bypasses the step whatever its on.
			holds, known, depends, err := n.If.partial(scope, s.unknown)
			switch {
			case err != nil:
				step.Outcome, step.Reason = DryFails, err.Error()
			case known && !holds:
				step.Outcome, step.Reason = DrySkipped, "its if is false: the step is bypassed with the same input"
			case !known && step.Outcome == DryRuns:
				step.Outcome, step.Reason = DryDepends, "its if depends on "+depends
			}
		}
		step.Context, step.Pending = s.context, s.describePending()
		if step.Outcome == DrySkipped {
			d.steps = append(d.steps, step)
			id = n.Bypass()
			continue
		}
		if step.Outcome == DryFails {
			d.steps = append(d.steps, step)
			return s, false
		}
		after, err := s.accrete(n, scope)
		if err != nil {
			step.Outcome, step.Reason = DryFails, err.Error()
			d.steps = append(d.steps, step)
			return s, false
		}
		step.Context, step.Pending = after.context, after.describePending()
		input, inputFrom, err := s.input(n, Scope{Payload: s.payload, Context: after.context, Config: scope.Config})
		if err != nil {
			step.Outcome, step.Reason = DryFails, err.Error()
			d.steps = append(d.steps, step)
			return s, false
		}
		step.Input, step.InputFrom = input, inputFrom
		d.steps = append(d.steps, step)
		if n.Kind != KindSplit {
			after.event, after.payload, after.from = "", nil, n.ID+"'s output"
			s, id = after, n.Next
			continue
		}
		branchInput := after
		if input != nil || inputFrom != "" {
			branchInput.payload, branchInput.from = input, inputFrom
		}
		var contexts []json.RawMessage
		joined := true
		for _, br := range n.Branches {
			end, ok := d.walk(br, branchInput.clone(), depth+1)
			if !ok && !n.ContinueOnError {
				joined = false
			}
			contexts = append(contexts, end.context)
			for path, dep := range end.pending {
				after.pending[path] = dep
			}
		}
		if !joined {
			return s, false
		}
		merged, err := MergeContexts(n.ID, after.context, contexts...)
		if err != nil {
			d.steps = append(d.steps, DryStep{Node: n.ID, Kind: "join", Depth: depth, Outcome: DryFails, Reason: err.Error(), Context: after.context})
			return s, false
		}
		after.context, after.event, after.payload, after.from = merged, EventJoin, nil, "the join of "+n.ID
		s, id = after, n.Next
	}
	return s, true
}

// unknown says what the value at path depends on, or "" when it is known.
func (s dryState) unknown(path string) string {
	switch {
	case path == "payload" || strings.HasPrefix(path, "payload."):
		return s.from
	case strings.HasPrefix(path, "context."):
		rest := strings.TrimPrefix(path, "context.")
		for _, p := range slices.Sorted(maps.Keys(s.pending)) {
			if rest == p || strings.HasPrefix(rest, p+".") || strings.HasPrefix(p, rest+".") {
				return s.pending[p]
			}
		}
	}
	return ""
}

// accrete applies n's claims: those whose source is known to the context,
// the others as pending paths.
func (s dryState) accrete(n *Node, scope Scope) (dryState, error) {
	out := s.clone()
	known := *n
	known.Baggage = nil
	for _, c := range n.Baggage {
		path := c.Path
		if c.Namespace != "" {
			path = c.Namespace
		}
		if dep := s.unknown(c.From); dep != "" {
			out.pending[path] = dep
			continue
		}
		known.Baggage = append(known.Baggage, c)
	}
	ctx, err := known.accrete(scope)
	if err != nil {
		return s, err
	}
	out.context = ctx
	return out, nil
}

// input is n's input payload, or what it depends on.
func (s dryState) input(n *Node, scope Scope) (json.RawMessage, string, error) {
	if n.With == nil {
		return s.payload, s.from, nil
	}
	for _, raw := range n.With {
		for _, ref := range references(decode(raw)) {
			if dep := s.unknown(ref); dep != "" {
				return nil, dep, nil
			}
		}
	}
	in, err := n.input(scope)
	return in, "", err
}

func (s dryState) clone() dryState {
	s.pending = maps.Clone(s.pending)
	if s.pending == nil {
		s.pending = map[string]string{}
	}
	return s
}

// describePending lists the pending paths as "path (depends on X)".
func (s dryState) describePending() []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(s.pending)) {
		out = append(out, fmt.Sprintf("%s (depends on %s)", p, s.pending[p]))
	}
	return out
}

// partial evaluates c where some paths are not known yet (unknown names
// what a path depends on, or ""): all is false when one part is false,
// any true when one part is true, whatever the unknown parts are.
func (c *Condition) partial(scope Scope, unknown func(path string) string) (holds, known bool, depends string, err error) {
	switch c.Op {
	case "all", "any":
		want := c.Op == "any" // the value that decides
		for _, o := range c.Of {
			h, k, dep, err := o.partial(scope, unknown)
			if err != nil {
				return false, true, "", err
			}
			if k && h == want {
				return want, true, "", nil
			}
			if !k && depends == "" {
				depends = dep
			}
		}
		if depends != "" {
			return false, false, depends, nil
		}
		return !want, true, "", nil
	case "not":
		if len(c.Of) != 1 {
			return false, true, "", fmt.Errorf("condition not: takes one condition, has %d", len(c.Of))
		}
		h, k, dep, err := c.Of[0].partial(scope, unknown)
		return !h, k, dep, err
	}
	if dep := unknown(c.Path); dep != "" {
		return false, false, dep, nil
	}
	h, err := c.eval(scope)
	return h, true, "", err
}
