package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJobCancelAndSIGHUP cancels a running job from the CLI (the daemon
// stops its plugin) and a queued one (at once), and checks a SIGHUP (a
// reload) leaves the daemon running.
func TestJobCancelAndSIGHUP(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
service: {max_workers: 1}
plugins:
  echo: {config: {mode: hang}, timeouts: {poll: 1m}}
`)
	d := w.startDaemon()
	var running, queued runView
	w.runJSON(0, &running, "plugin", "run", "echo", "--json")
	w.runJSON(0, &queued, "plugin", "run", "echo", "--json")
	w.waitInspect(running.JobID, "running", func(in inspectView) bool { return in.Job.Status == "running" })

	// A SIGHUP reloads the config (unchanged): the daemon runs on.
	require.NoError(t, syscall.Kill(d.pid(), syscall.SIGHUP))
	d.waitLine(t, 0, func(l string) bool { return strings.Contains(l, "SIGHUP received") })

	// --dry-run changes nothing.
	var dry map[string]any
	w.runJSON(0, &dry, "job", "cancel", queued.JobID, "--dry-run", "--json")
	require.Equal(t, map[string]any{"job_id": queued.JobID, "status_before": "queued", "status": "queued", "dry_run": true}, dry)
	require.Equal(t, "queued", w.inspect(queued.JobID).Job.Status)

	// A queued job is canceled at once.
	var out map[string]any
	w.runJSON(0, &out, "job", "cancel", queued.JobID, "--reason", "not needed", "--json")
	require.Equal(t, "canceled", out["status"])

	// A running one gets a cancel request; the daemon stops its plugin, and
	// the answer says so.
	r := w.run("job", "cancel", running.JobID)
	require.Equal(t, 0, r.code, "%s", r)
	require.Equal(t, fmt.Sprintf("job %s: cancel requested; the daemon (pid %d) stops its plugin (see: ductile job inspect %s)\n", running.JobID, d.pid(), running.JobID), r.stdout)
	in := w.waitInspect(running.JobID, "canceled", func(in inspectView) bool { return in.Job.Status == "canceled" })
	require.Equal(t, "canceled", in.Attempts[0].Status)

	// Canceling a finished job is refused.
	r = w.run("job", "cancel", running.JobID)
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "only a queued or running job can be canceled")

	w.stopDaemon(d)
	w.replayAndVerify()
}

// TestJobCancelStopsAPluginRunWithoutDaemon: a plugin run that runs its job
// itself (no daemon) stops it when another process cancels the job.
func TestJobCancelStopsAPluginRunWithoutDaemon(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  echo: {config: {mode: hang}, timeouts: {poll: 1m}}
`)
	run := start(t, nil, w.args("plugin", "run", "echo", "--json")...)
	var id string
	waitFor(t, waitTimeout, "the job to show up as running", func() bool {
		r := w.run("job", "list", "--json")
		if r.code != 0 {
			require.Contains(t, r.stderr, "no ledger at", "only until plugin run has created it")
			return false
		}
		var jobs []jobView
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &jobs), r.stdout)
		for _, j := range jobs {
			if j.Status == "running" {
				id = j.ID
			}
		}
		return id != ""
	})
	r := w.run("job", "cancel", id)
	require.Equal(t, 0, r.code, "%s", r)
	require.Equal(t, fmt.Sprintf("job %s: cancel requested; the ductile plugin run running it (pid %d) stops its plugin (see: ductile job inspect %s)\n", id, run.pid(), id), r.stdout)

	require.Equal(t, 1, run.wait(t), "plugin run reports the canceled job with exit 1")
	lines, _ := run.snapshot()
	var res runView
	require.NoError(t, json.Unmarshal([]byte(strings.Join(lines, "\n")), &res))
	require.Equal(t, runView{JobID: id, Plugin: "echo", Command: "poll", Status: "canceled", Attempt: 1, Error: "canceled by request", RanBy: "cli"}, res)
	require.Equal(t, "canceled", w.inspect(id).Job.Status)
	w.replayAndVerify()
}
