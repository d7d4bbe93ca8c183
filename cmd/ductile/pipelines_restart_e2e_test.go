package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// TestPipelineRunsAcrossRestarts: a run started with no daemon waits in
// the queue; a step killed on its last attempt fails its run with the
// reason; a run whose pipeline the restarted daemon's config no longer has
// finishes on the version it started with.
func TestPipelineRunsAcrossRestarts(t *testing.T) {
	t.Parallel()
	plugins := []stepPlugin{{name: "b"}, {name: "c"}, {name: "hold", waitFile: true}, {name: "hold2", waitFile: true}}
	cfg := `
plugin_roots: ["$ROOT"]
plugins:
  hold: {retry: {max_attempts: 1}}
  hold2: {retry: {max_attempts: 3, backoff_base: 10ms}}
pipelines:
  - name: p
    steps:
      - {id: h, uses: hold}
      - {id: n, uses: c}
  - name: p2
    steps:
      - {id: h, uses: hold2}
      - {id: n, uses: c}
  - name: q
    steps:
      - {id: h, uses: b}
`
	w := newPipeWorld(t, plugins, cfg)
	l := openLedger(t, w.state)
	// No daemon: the run waits in the queue.
	var out runOutput
	w.runJSON(0, &out, "pipeline", "run", "q", "--json")
	d := w.startDaemon()
	r := w.waitRun(l, "q", func(r *pipeRun) bool { return r.ID == out.RunID })
	require.Equal(t, events.RunSucceeded, r.Finished.Status)

	// Killed on the last attempt: recovery ends it dead, the run fails once.
	w.runJSON(0, &out, "pipeline", "run", "p", "--json")
	waitFor(t, waitTimeout, "hold", func() bool { _, err := os.Stat(filepath.Join(w.scratch, "hold.waiting")); return err == nil })
	require.Equal(t, -1, d.signal(t, syscall.SIGKILL))
	d = w.startDaemon()
	r = w.waitRun(l, "p", func(r *pipeRun) bool { return r.ID == out.RunID })
	require.Equal(t, events.RunFailed, r.Finished.Status)
	require.Contains(t, r.Finished.Error, "the process running it stopped before it finished")

	// Restart with the pipeline gone from the config while a run is on it.
	w.runJSON(0, &out, "pipeline", "run", "p2", "--json")
	waitFor(t, waitTimeout, "hold2", func() bool { _, err := os.Stat(filepath.Join(w.scratch, "hold2.waiting")); return err == nil })
	require.Equal(t, -1, d.signal(t, syscall.SIGKILL))
	b, err := os.ReadFile(w.config)
	require.NoError(t, err)
	nb := strings.Replace(string(b), "  - name: p2\n    steps:\n      - {id: h, uses: hold2}\n      - {id: n, uses: c}\n", "", 1)
	require.NotEqual(t, string(b), nb)
	require.NoError(t, os.WriteFile(w.config, []byte(nb), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "release"), nil, 0o644))
	d = w.startDaemon()
	r = w.waitRun(l, "p after restart", func(r *pipeRun) bool { return r.ID == out.RunID })
	require.Equal(t, events.RunSucceeded, r.Finished.Status, "%+v", r.Finished)
	require.Equal(t, "c", r.node(t, "n").Enq.Plugin, "the run went on with the version it started on, read from the ledger")
	w.stopDaemon(d)
	w.replayAndVerify()
}
