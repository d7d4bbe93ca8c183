package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pluginShowView is what plugin show --json prints.
type pluginShowView struct {
	Plugin *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"plugin"`
	Name   string           `json:"name"`
	State  json.RawMessage  `json:"state"`
	Totals map[string]int64 `json:"totals"`
	Health struct {
		Summary string `json:"summary"`
	} `json:"health"`
	Jobs []jobView `json:"jobs"`
}

// pluginLogLine is one line of plugin logs --json.
type pluginLogLine struct {
	Seq     int64  `json:"seq"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Stream  string `json:"stream"`
	Message string `json:"message"`
}

// TestPluginShowLogsAndLastRuns: plugin show gives a plugin's state and
// last runs, plugin logs the log lines of its jobs (and --follow those of
// jobs enqueued later), and system status the last run of each plugin
// (spec §11.6 status and logs; issue 20, item 23).
func TestPluginShowLogsAndLastRuns(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugin_roots: [$PLUGINS]\nplugins:\n  misbehave:\n    retry: {max_attempts: 1}\n    config: {mode: exit78}\n")
	var ran runView
	w.runJSON(0, &ran, "plugin", "run", "echo", "--json")
	w.runJSON(1, &ran, "plugin", "run", "misbehave", "--json")

	var show pluginShowView
	w.runJSON(0, &show, "plugin", "show", "echo", "--json")
	require.NotNil(t, show.Plugin, "loaded")
	require.Equal(t, "echo", show.Plugin.Name)
	require.Equal(t, map[string]int64{"succeeded": 1}, show.Totals)
	require.Len(t, show.Jobs, 1)
	require.Equal(t, "succeeded", show.Jobs[0].Status)
	require.True(t, json.Valid(show.State))
	r := w.run("plugin", "show", "misbehave")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "ended     0 succeeded, 1 dead, 0 canceled")
	require.Contains(t, r.stdout, "exit 78: misbehave: bad config")
	r = w.run("plugin", "show", "ecoh", "--json")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, `"code":"not_found"`)
	require.Contains(t, r.stderr, `did you mean \"echo\"`)

	var lines []pluginLogLine
	w.runJSON(0, &lines, "plugin", "logs", "misbehave", "--json")
	require.Len(t, lines, 1)
	require.Equal(t, "misbehave: bad config", lines[0].Message)
	require.Equal(t, "stderr", lines[0].Stream)
	r = w.run("plugin", "logs", "misbehave")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, " #1 stderr misbehave: bad config")
	r = w.run("plugin", "logs", "echo")
	require.Contains(t, r.stdout, " #1 info   echo poll run 1", "the logs of its responses too")
	r = w.run("plugin", "logs", "slow")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "no log lines of plugin slow's jobs")

	// system status: the last run of each plugin.
	var st struct {
		Plugins []struct {
			Name    string   `json:"name"`
			LastRun *jobView `json:"last_run"`
		} `json:"plugins"`
	}
	w.runJSON(0, &st, "system", "status", "--no-health", "--json")
	last := map[string]string{}
	for _, p := range st.Plugins {
		if p.LastRun != nil {
			last[p.Name] = p.LastRun.Status
		}
	}
	require.Equal(t, map[string]string{"echo": "succeeded", "misbehave": "dead"}, last)
	r = w.run("system", "status", "--no-health")
	require.Contains(t, r.stdout, "LAST RUN")

	// --follow: the tail, then the lines of a job enqueued later, run by a
	// daemon.
	d := w.startDaemon()
	defer w.stopDaemon(d)
	follow := start(t, nil, w.args("plugin", "logs", "misbehave", "--follow", "--json")...)
	first, _ := follow.waitLine(t, 0, func(string) bool { return true })
	var line pluginLogLine
	require.NoError(t, json.Unmarshal([]byte(first), &line))
	require.Equal(t, lines[0], line, "the tail first")
	var again runView
	w.runJSON(0, &again, "plugin", "run", "misbehave", "--json")
	next, _ := follow.waitLine(t, 1, func(s string) bool { return strings.Contains(s, again.JobID) })
	require.NoError(t, json.Unmarshal([]byte(next), &line))
	require.Equal(t, "misbehave: bad config", line.Message)
	follow.kill()
}
