package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ductile/ductile/config"
)

// arrival is what a node can be entered with: event types, each with
// where it comes from.
type arrival struct {
	types map[string]string // event type → where it comes from
	// open: a source's types are not known (a plugin whose manifest
	// declares no events, or the first step of a pipeline others call).
	open bool
	// declared: some types are only what a manifest declares.
	declared bool
}

func (a *arrival) add(o arrival) {
	if a.types == nil {
		a.types = map[string]string{}
	}
	for t, from := range o.types {
		if _, ok := a.types[t]; !ok {
			a.types[t] = from
		}
	}
	a.open = a.open || o.open
	a.declared = a.declared || o.declared
}

// without is a with the types of on removed (what a node gated by on
// alone passes to its bypass).
func (a arrival) without(on []string) arrival {
	out := arrival{types: map[string]string{}, open: a.open, declared: a.declared}
	for t, from := range a.types {
		if !slices.Contains(on, t) {
			out.types[t] = from
		}
	}
	return out
}

// OnWarnings lists each step whose on: names no event type the step can be
// entered with, by what the plugins' manifests declare they emit: emits
// gives a plugin command's declared event types (known false when its
// manifest declares none: it may emit anything). What is certain without
// the manifests (a step after a join, the first step of a pipeline no
// other calls) is a compile error instead.
func OnWarnings(s *Set, emits func(plugin, command string) (types []string, known bool)) []config.FieldError {
	if s == nil || emits == nil {
		return nil
	}
	return s.checkOn(emits)
}

// checkOn reports each step whose on: lists none of the event types it can
// be entered with: with emits nil, only where that is certain (Compile's
// errors); else only where it rests on the manifests' declarations
// (OnWarnings).
func (s *Set) checkOn(emits func(plugin, command string) ([]string, bool)) []config.FieldError {
	var out []config.FieldError
	for _, name := range slices.Sorted(maps.Keys(s.Pipelines)) {
		p := s.Pipelines[name]
		arrivals := map[string]*arrival{}
		send := func(id string, a arrival) {
			if id == "" {
				return
			}
			if arrivals[id] == nil {
				arrivals[id] = &arrival{types: map[string]string{}}
			}
			arrivals[id].add(a)
		}
		send(p.Entry, p.entryArrival(s.called[name]))
		// Order is a topological order: every edge (next, branch, bypass,
		// join) goes to a node written after.
		for _, n := range p.Order() {
			in := arrivals[n.ID]
			if in == nil {
				continue
			}
			if len(n.On) > 0 && !in.open && (emits == nil) != in.declared && !slices.ContainsFunc(n.On, func(t string) bool { _, ok := in.types[t]; return ok }) {
				out = append(out, onMismatch(p, n, *in))
			}
			if n.Gated() {
				bypass := *in
				if n.If == nil {
					bypass = in.without(n.On)
				}
				send(n.Bypass(), bypass)
			}
			if n.Kind == KindSplit {
				for _, br := range n.Branches {
					send(br, *in)
				}
				send(n.Next, arrival{types: map[string]string{EventJoin: "the join of split " + n.ID}})
				continue
			}
			send(n.Next, n.outputs(emits))
		}
	}
	return out
}

// entryArrival is what a pipeline's first step is entered with: a run from
// the API or CLI, or its trigger; anything when another pipeline calls it
// (each call is checked where it is inlined).
func (p *Pipeline) entryArrival(called bool) arrival {
	if called {
		return arrival{open: true}
	}
	a := arrival{types: map[string]string{EventRun: "how a run from the API or CLI starts"}}
	switch {
	case p.On != "":
		a.types[p.On] = "the trigger, on: " + p.On
	case p.OnHook != "":
		a.types[string(p.OnHook)] = "the trigger, on-hook: " + string(p.OnHook)
	}
	return a
}

// outputs is what a uses node hands the step after it: the event types its
// plugin's manifest declares, and ductile.step.succeeded when it emits
// none; anything when they are not known.
func (n *Node) outputs(emits func(plugin, command string) ([]string, bool)) arrival {
	if emits == nil {
		return arrival{open: true}
	}
	types, known := emits(n.Plugin, n.Command)
	if !known {
		return arrival{open: true}
	}
	a := arrival{types: map[string]string{EventStepSucceeded: "step " + n.ID + " when it emits no event"}, declared: true}
	for _, t := range types {
		a.types[t] = "step " + n.ID + ": " + n.Plugin + " declares emitting it"
	}
	return a
}

// onMismatch is the error (or warning) for node n of p, whose on: matches
// nothing it can be entered with (in).
func onMismatch(p *Pipeline, n *Node, in arrival) config.FieldError {
	types := slices.Sorted(maps.Keys(in.types))
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = t + " (" + in.types[t] + ")"
	}
	suggestion := ""
	for _, t := range n.On {
		if s := config.Suggest(t, types); s != "" {
			suggestion = " (did you mean " + s + "?)"
			break
		}
	}
	return config.FieldError{File: n.File, Line: n.Line, Path: "pipelines[" + p.Name + "].steps[" + n.ID + "].on",
		Msg: fmt.Sprintf("the step runs on %s, but it can only be entered with %s, so it never runs: list one of those event types in on:%s",
			strings.Join(n.On, ", "), strings.Join(parts, ", "), suggestion)}
}
