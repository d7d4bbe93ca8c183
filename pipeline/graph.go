package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Order returns the pipeline's nodes in the order they are written: from
// Entry, each split followed by its branches, then what comes after it.
func (p *Pipeline) Order() []*Node {
	var out []*Node
	seen := map[string]bool{}
	var visit func(id string)
	visit = func(id string) {
		for id != "" && !seen[id] {
			n := p.Nodes[id]
			if n == nil {
				return
			}
			seen[id] = true
			out = append(out, n)
			for _, br := range n.Branches {
				visit(br)
			}
			id = n.Next
		}
	}
	visit(p.Entry)
	return out
}

// SplitOf is the innermost split whose branches hold node id, or "" when
// the node is on the pipeline's main sequence (or not in it).
func (p *Pipeline) SplitOf(id string) string {
	var walk func(from, split string) (string, bool)
	walk = func(from, split string) (string, bool) {
		for from != "" {
			if from == id {
				return split, true
			}
			n := p.Nodes[from]
			if n == nil {
				return "", false
			}
			for _, br := range n.Branches {
				if found, ok := walk(br, n.ID); ok {
					return found, true
				}
			}
			from = n.Next
		}
		return "", false
	}
	split, _ := walk(p.Entry, "")
	return split
}

// Gated reports whether the node has an on or an if: it may be bypassed.
func (n *Node) Gated() bool { return n.If != nil || len(n.On) > 0 }

// Bypass is where a gate that does not pass (a false If, an event type On
// does not list) goes: Skip when set ("" for SkipToEnd: the end of the
// branch), else Next.
func (n *Node) Bypass() string {
	switch n.Skip {
	case "":
		return n.Next
	case SkipToEnd:
		return ""
	}
	return n.Skip
}

// Gate is the node's on and if as one line: "on a, b and if payload.x
// exists"; "" when it has neither.
func (n *Node) Gate() string {
	var parts []string
	if len(n.On) > 0 {
		parts = append(parts, "on "+strings.Join(n.On, ", "))
	}
	if n.If != nil {
		parts = append(parts, "if "+n.If.String())
	}
	return strings.Join(parts, " and ")
}

// Trigger says what starts the pipeline: "on: <event>", "on-hook:
// <signal>", or "run" (only the API and CLI start it).
func (p *Pipeline) Trigger() string {
	switch {
	case p.On != "":
		return "on: " + p.On
	case p.OnHook != "":
		return "on-hook: " + string(p.OnHook)
	}
	return "run (API or CLI only)"
}

// Graph is a pipeline drawn as vertices and edges: what Mermaid prints
// and the web page draws.
type Graph struct {
	Vertices []Vertex `json:"vertices"`
	Edges    []Edge   `json:"edges"`
}

// Vertex kinds.
const (
	VertexStart = "start"
	VertexStep  = "step"
	VertexGate  = "gate"
	VertexSplit = "split"
	VertexJoin  = "join"
	VertexEnd   = "end"
)

// Vertex is one box of a Graph.
type Vertex struct {
	// ID is "start", "done", "n1" (the first node in Order), "c1" (its
	// gate) or "j1" (the join of split n1).
	ID   string `json:"id"`
	Kind string `json:"kind" enum:"start,step,gate,split,join,end"`
	// Node is the pipeline node a step, gate, split or join belongs to.
	Node string `json:"node,omitempty"`
	// Label is the trigger (start), the node id (step), the gate's text
	// (gate), "ID: split" (split), "join ID" (join) or "end".
	Label   string `json:"label"`
	Plugin  string `json:"plugin,omitempty"`  // step only
	Command string `json:"command,omitempty"` // step only
}

// Edge is one arrow of a Graph, from vertex id to vertex id.
type Edge struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Label string `json:"label,omitempty"` // "true", "false", "branch 1", …
}

// Graph returns the pipeline as vertices and edges: start first, then
// each node's gate, the node and (for a split) its branches and join in
// walk order, done last. Every edge's ends are vertices of the graph.
func (p *Pipeline) Graph() Graph {
	order := p.Order()
	short := make(map[string]string, len(order)) // node id → vertex id
	for i, n := range order {
		short[n.ID] = fmt.Sprintf("n%d", i+1)
	}
	entry := func(id string) string {
		if n := p.Nodes[id]; n != nil && n.Gated() {
			return "c" + short[id][1:]
		}
		return short[id]
	}
	target := func(next, after string) string {
		if next == "" {
			return after
		}
		return entry(next)
	}
	g := Graph{Vertices: []Vertex{}, Edges: []Edge{}}
	vertex := func(v Vertex) { g.Vertices = append(g.Vertices, v) }
	edge := func(from, to, label string) { g.Edges = append(g.Edges, Edge{From: from, To: to, Label: label}) }
	vertex(Vertex{ID: "start", Kind: VertexStart, Label: p.Trigger()})
	edge("start", target(p.Entry, "done"), "")
	var walk func(id, after string)
	walk = func(id, after string) {
		for id != "" {
			n := p.Nodes[id]
			if n == nil {
				return
			}
			m := short[id]
			if n.Gated() {
				c := entry(id)
				vertex(Vertex{ID: c, Kind: VertexGate, Node: n.ID, Label: n.Gate()})
				edge(c, m, "true")
				edge(c, target(n.Bypass(), after), "false")
			}
			if n.Kind == KindSplit {
				text := n.ID + ": split"
				if n.ContinueOnError {
					text += " (continue_on_error)"
				}
				join := "j" + m[1:]
				vertex(Vertex{ID: m, Kind: VertexSplit, Node: n.ID, Label: text})
				for i, br := range n.Branches {
					edge(m, target(br, join), fmt.Sprintf("branch %d", i+1))
				}
				for _, br := range n.Branches {
					walk(br, join)
				}
				vertex(Vertex{ID: join, Kind: VertexJoin, Node: n.ID, Label: "join " + n.ID})
				edge(join, target(n.Next, after), "")
			} else {
				vertex(Vertex{ID: m, Kind: VertexStep, Node: n.ID, Label: n.ID, Plugin: n.Plugin, Command: n.Command})
				edge(m, target(n.Next, after), "")
			}
			id = n.Next
		}
	}
	walk(p.Entry, "done")
	vertex(Vertex{ID: "done", Kind: VertexEnd, Label: "end"})
	return g
}

// Mermaid returns the pipeline's Graph as a Mermaid flowchart: a node per
// step, a split fanning out to its branches and a join node where they
// meet, an if as a decision with true and false edges.
func (p *Pipeline) Mermaid() string {
	g := p.Graph()
	from := make(map[string][]Edge, len(g.Vertices))
	for _, e := range g.Edges {
		from[e.From] = append(from[e.From], e)
	}
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for _, v := range g.Vertices {
		switch v.Kind {
		case VertexStart:
			fmt.Fprintf(&b, "  %s([%s])\n", v.ID, label(v.Label))
		case VertexEnd:
			fmt.Fprintf(&b, "  %s([%s])\n", v.ID, v.Label) // unquoted, as Mermaid has always been printed
		case VertexGate:
			fmt.Fprintf(&b, "  %s{%s}\n", v.ID, label(v.Label))
		case VertexSplit:
			fmt.Fprintf(&b, "  %s{{%s}}\n", v.ID, label(v.Label))
		case VertexJoin:
			fmt.Fprintf(&b, "  %s((%s))\n", v.ID, label(v.Label))
		default:
			fmt.Fprintf(&b, "  %s[%s]\n", v.ID, label(v.Label+"<br/>"+v.Plugin+"."+v.Command))
		}
		for _, e := range from[v.ID] {
			if e.Label != "" {
				fmt.Fprintf(&b, "  %s -->|%s| %s\n", e.From, e.Label, e.To)
			} else {
				fmt.Fprintf(&b, "  %s --> %s\n", e.From, e.To)
			}
		}
	}
	return b.String()
}

// label quotes text for a Mermaid node or edge.
func label(text string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<br/>", "<br/>", "<", "#lt;", ">", "#gt;")
	return `"` + r.Replace(text) + `"`
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
