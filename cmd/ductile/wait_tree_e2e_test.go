package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPluginRunWaitTree: plugin run --wait returns once its job is
// finished, while a job it routed still runs; --wait-tree returns only once
// every job of the tree is finished, prints the tree (its jobs as --json's
// "tree"), and exits 1 unless every one succeeded. Without a daemon it is
// refused before anything is enqueued.
func TestPluginRunWaitTree(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
api: {enabled: false}
service: {max_workers: 4}
plugins:
  slow: {retry: {max_attempts: 1}, config: {dir: "$SCRATCH"}}
routes:
  - {from: echo, event_type: echo.poll, to: slow, command: poll}
`)
	// Without a daemon: refused, nothing enqueued.
	r := w.run("plugin", "run", "echo", "--command", "poll", "--wait-tree")
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, "ductile: --wait-tree needs a running daemon: without one, plugin run runs its own job only, and the jobs it routes wait for a daemon "+
		"(start one with: ductile system start (or use --wait for this job alone))\n", r.stderr)
	require.Empty(t, w.jobList())

	w.startDaemon()
	type treeOut struct {
		runView
		Tree struct {
			Root string    `json:"root_job_id"`
			Jobs []jobView `json:"jobs"`
		} `json:"tree"`
	}
	// --wait: the job is finished, its routed child is not (slow waits for
	// the release file).
	var first treeOut
	w.runJSON(0, &first, "plugin", "run", "echo", "--command", "poll", "--wait", "--json")
	require.Equal(t, "succeeded", first.Status)
	require.Empty(t, first.Tree.Jobs, "--wait prints no tree")
	var tree treeView
	w.runJSON(0, &tree, "job", "tree", first.JobID, "--json")
	require.Len(t, tree.Jobs, 2)
	require.Contains(t, []string{"queued", "running"}, tree.Jobs[1].Status, "the child goes on after --wait returned")

	// --wait-tree: still waiting once its own job and its child run, and
	// done once both children (this one's and the first's) are released.
	p := start(t, nil, w.args("plugin", "run", "echo", "--command", "poll", "--wait-tree", "--json")...)
	waitFor(t, waitTimeout, "the second echo's child to be running", func() bool {
		running := 0
		for _, j := range w.jobList("--status", "running") {
			if j.Plugin == "slow" {
				running++
			}
		}
		return running == 2
	})
	select {
	case <-p.done:
		t.Fatalf("--wait-tree returned while a child of its job runs: %s", p.kill())
	default:
	}
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "release"), nil, 0o600))
	require.Equal(t, 0, p.wait(t), "%s", p.kill())
	lines, _ := p.snapshot()
	var second treeOut
	require.NoError(t, json.Unmarshal([]byte(strings.Join(lines, "\n")), &second))
	require.Equal(t, "succeeded", second.Status)
	require.Equal(t, second.JobID, second.Tree.Root)
	require.Len(t, second.Tree.Jobs, 2)
	for _, j := range second.Tree.Jobs {
		require.Equal(t, "succeeded", j.Status, "%s %s", j.Plugin, j.ID)
	}

	// As text: the job's result, then its tree by short ids.
	r = w.run("plugin", "run", "echo", "--command", "poll", "--wait-tree")
	require.Equal(t, 0, r.code, "%s", r)
	out := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, out, 3, r.stdout)
	require.Regexp(t, `^job (\S+) succeeded \(attempt 1, \d+ ms\): echo poll$`, out[0])
	id := strings.Fields(out[0])[1]
	require.Equal(t, "*"+id[24:]+"  echo poll  succeeded (attempt 1/4)", out[1])
	require.Regexp(t, `^   [0-9a-f]{12}  slow poll  succeeded \(attempt 1/1\)$`, out[2])

	// A child that does not succeed: exit 1, the tree says which.
	require.NoError(t, os.Remove(filepath.Join(w.scratch, "release")))
	require.NoError(t, os.RemoveAll(w.scratch)) // slow fails at once without its dir
	r = w.run("plugin", "run", "echo", "--command", "poll", "--wait-tree")
	require.Equal(t, 1, r.code, "%s", r)
	require.Regexp(t, `\n   [0-9a-f]{12}  slow poll  dead \(attempt 1/1\)\n$`, r.stdout)
}
