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

// Mermaid returns the pipeline as a Mermaid flowchart: a node per step,
// a split fanning out to its branches and a join node where they meet, an
// if as a decision with true and false edges.
func (p *Pipeline) Mermaid() string {
	order := p.Order()
	short := make(map[string]string, len(order)) // node id → mermaid id
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
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	fmt.Fprintf(&b, "  start([%s])\n", label(p.Trigger()))
	fmt.Fprintf(&b, "  start --> %s\n", target(p.Entry, "done"))
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
				fmt.Fprintf(&b, "  %s{%s}\n", c, label(n.Gate()))
				fmt.Fprintf(&b, "  %s -->|true| %s\n", c, m)
				fmt.Fprintf(&b, "  %s -->|false| %s\n", c, target(n.Bypass(), after))
			}
			if n.Kind == KindSplit {
				text := n.ID + ": split"
				if n.ContinueOnError {
					text += " (continue_on_error)"
				}
				join := "j" + m[1:]
				fmt.Fprintf(&b, "  %s{{%s}}\n", m, label(text))
				for i, br := range n.Branches {
					fmt.Fprintf(&b, "  %s -->|branch %d| %s\n", m, i+1, target(br, join))
				}
				for _, br := range n.Branches {
					walk(br, join)
				}
				fmt.Fprintf(&b, "  %s((%s))\n", join, label("join "+n.ID))
				fmt.Fprintf(&b, "  %s --> %s\n", join, target(n.Next, after))
			} else {
				fmt.Fprintf(&b, "  %s[%s]\n", m, label(n.ID+"<br/>"+n.Plugin+"."+n.Command))
				fmt.Fprintf(&b, "  %s --> %s\n", m, target(n.Next, after))
			}
			id = n.Next
		}
	}
	walk(p.Entry, "done")
	b.WriteString("  done([end])\n")
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
