package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSelfRouteStopsAtTheDepthLimit runs a plugin whose handle always emits
// an event routed back to its own handle, with max_route_depth 3: the chain
// is the root and three routed jobs (depths 1 to 3), the last one's success
// records the route it dropped and why, the daemon warns, and nothing
// loops on.
func TestSelfRouteStopsAtTheDepthLimit(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "loop")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(`manifest_spec: ductile.plugin
manifest_version: 1
name: loop
version: 0.1.0
protocol: 2
entrypoint: run.sh
commands: {handle: {type: write}}
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null\n"+
		`printf '%s\n' '{"status":"ok","result":"again","events":[{"type":"loop.again","payload":{}}]}'`+"\n"), 0o755))
	w := newJobWorld(t, `
plugin_roots: ["`+root+`"]
service: {max_route_depth: 3}
routes:
  - {from: loop, event_type: loop.again, to: loop}
`)
	check := w.run("config", "check")
	require.Equal(t, 0, check.code, "a cycle is a warning, not an error:\n%s", check)
	require.Contains(t, check.stdout+check.stderr, "route cycle loop -> loop")

	d := w.startDaemon()
	var run runView
	w.runJSON(0, &run, "plugin", "run", "loop", "--command", "handle", "--wait", "--json")
	require.Equal(t, "succeeded", run.Status)

	type depthView struct {
		Depth         int `json:"depth"`
		DroppedRoutes []struct {
			Plugin    string `json:"plugin"`
			Command   string `json:"command"`
			EventType string `json:"event_type"`
			Depth     int    `json:"depth"`
			Limit     int    `json:"limit"`
			Reason    string `json:"reason"`
		} `json:"dropped_routes"`
	}
	// Walk the chain: each job has one child, until the last has none.
	id := run.JobID
	for depth := 0; depth < 3; depth++ {
		in := w.waitInspect(id, "settled with a succeeded child", func(in inspectView) bool {
			return in.settled() && len(in.Children) == 1 && in.Children[0].Status == "succeeded"
		})
		var dv depthView
		w.runJSON(0, &dv, "job", "inspect", id, "--json")
		require.Equal(t, depth, dv.Depth)
		require.Empty(t, dv.DroppedRoutes)
		id = in.Children[0].ID
	}
	last := w.waitSettled(id)
	require.Equal(t, "succeeded", last.Job.Status)
	require.Empty(t, last.Children, "nothing past the limit is enqueued")
	var dv depthView
	w.runJSON(0, &dv, "job", "inspect", id, "--json")
	require.Equal(t, 3, dv.Depth)
	require.Len(t, dv.DroppedRoutes, 1)
	dropped := dv.DroppedRoutes[0]
	require.Equal(t, "loop", dropped.Plugin)
	require.Equal(t, "handle", dropped.Command)
	require.Equal(t, "loop.again", dropped.EventType)
	require.Equal(t, 4, dropped.Depth)
	require.Equal(t, 3, dropped.Limit)
	require.Contains(t, dropped.Reason, "max_route_depth")

	text := w.run("job", "inspect", id)
	require.Equal(t, 0, text.code, "%s", text)
	require.Contains(t, text.stdout, "depth      3\n")
	require.Contains(t, text.stdout, "dropped    route loop.again -> loop handle at depth 4 (limit 3)")

	d.waitLine(t, 0, func(line string) bool {
		return strings.Contains(line, `"routed job dropped: the route chain is too deep"`) && strings.Contains(line, `"depth":4`)
	})
	w.stopDaemon(d)
	require.Len(t, w.jobList("--limit", "100"), 4, "the root and three routed jobs, no more")
	w.replayAndVerify()
}
