package config

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxCyclesReported bounds the cycles RouteCycles lists: a dense routing
// table has very many, and the first few say enough.
const maxCyclesReported = 20

// RouteCycles returns every cycle of the routes read as a graph of plugins
// (from → to), self-routes included, each as a path that starts and ends at
// its smallest plugin name: "a -> b -> a". Whether a cycle loops depends on
// the events its plugins emit; service.max_route_depth stops one that does.
func (c *Config) RouteCycles() [][]string {
	next := map[string][]string{}
	for _, r := range c.Routes {
		if !slices.Contains(next[r.From], r.To) {
			next[r.From] = append(next[r.From], r.To)
		}
	}
	nodes := make([]string, 0, len(next))
	for from, tos := range next {
		slices.Sort(tos)
		nodes = append(nodes, from)
	}
	slices.Sort(nodes)
	var cycles [][]string
	// Each cycle is found once, from its smallest plugin: the walk from
	// start visits only plugins greater than start.
	for _, start := range nodes {
		path := []string{start}
		onPath := map[string]bool{start: true}
		var walk func(at string)
		walk = func(at string) {
			for _, to := range next[at] {
				if len(cycles) >= maxCyclesReported {
					return
				}
				switch {
				case to == start:
					cycles = append(cycles, append(slices.Clone(path), start))
				case to > start && !onPath[to]:
					path, onPath[to] = append(path, to), true
					walk(to)
					path, onPath[to] = path[:len(path)-1], false
				}
			}
		}
		walk(start)
	}
	return cycles
}

// cycleWarnings warns of each route cycle, at the first route of the cycle.
func (c *Config) cycleWarnings(at func(n *yaml.Node, path, format string, args ...any) FieldError) []FieldError {
	var out []FieldError
	for _, cycle := range c.RouteCycles() {
		i := slices.IndexFunc(c.Routes, func(r Route) bool { return r.From == cycle[0] && r.To == cycle[1] })
		var n *yaml.Node
		if i < len(c.routeNodes) {
			n = c.routeNodes[i]
		}
		out = append(out, at(n, indexPath("routes", i), "route cycle %s: a job may route back to a plugin it came from; service.max_route_depth (%d) stops such a chain",
			strings.Join(cycle, " -> "), c.Service.MaxRouteDepth))
	}
	return out
}
