package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

const probeConfig = `
plugin_roots: ["$ROOT"]
service: {max_workers: 4}
plugins:
  sleepy: {notify_on_complete: true, retry: {max_attempts: 1}, timeouts: {handle: 1s}}
  loopy: {notify_on_complete: true}
pipelines:
  - name: rl
    steps:
      - {id: h, uses: hold}
      - {id: next, uses: STEP2}
  - name: ontimeout
    on-hook: job.timed_out
    steps:
      - {id: t, uses: b}
  - name: onfailed
    on-hook: job.failed
    steps:
      - {id: f, uses: c}
  - name: loop
    on-hook: job.completed
    steps:
      - {id: l, uses: loopy}
  - name: sgate
    steps:
      - id: sp
        if: {path: payload.go, op: eq, value: true}
        split: [{id: x, uses: b}, {id: y, uses: c}]
      - {id: after, uses: d}
  - name: tmpl
    steps:
      - {id: w, uses: b, with: {u: "{payload.url}", s: "x {payload.url}", n: 3, o: "{payload.obj}"}}
`

// TestPipelineOperationsE2E: a reload while a run goes on, a canceled
// step, a false if on a split, with templates, a timed-out hook and a hook
// loop capped by service.max_hook_depth.
func TestPipelineOperationsE2E(t *testing.T) {
	t.Parallel()
	plugins := []stepPlugin{{name: "b"}, {name: "c"}, {name: "d"}, {name: "loopy"}, {name: "hold", waitFile: true}, {name: "sleepy", sleep: "5"}}
	w := newPipeWorld(t, plugins, strings.ReplaceAll(probeConfig, "STEP2", "c"))
	d := w.startDaemon()
	l := openLedger(t, w.state)

	t.Run("reload mid-run finishes on the old version", func(t *testing.T) {
		var out runOutput
		w.runJSON(0, &out, "pipeline", "run", "rl", "--json")
		waitFor(t, waitTimeout, "hold to run", func() bool { _, err := os.Stat(filepath.Join(w.scratch, "hold.waiting")); return err == nil })
		b, err := os.ReadFile(w.config)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(w.config, []byte(strings.Replace(string(b), "uses: c}\n  - name: ontimeout", "uses: d}\n  - name: ontimeout", 1)), 0o600))
		r := w.run("system", "reload", "--json")
		require.Equal(t, 0, r.code, "%s", r)
		require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "release"), nil, 0o644))
		run := w.waitRun(l, "rl to finish", func(r *pipeRun) bool { return r.ID == out.RunID })
		require.Equal(t, events.RunSucceeded, run.Finished.Status)
		require.Equal(t, "c", run.node(t, "next").Enq.Plugin, "the old version")
		out2 := w.runPipeline("rl", `{}`, 0)
		runs, _ := w.facts(l)
		require.Equal(t, "d", runs[out2.RunID].node(t, "next").Enq.Plugin, "the new version")
	})

	t.Run("cancel a running step", func(t *testing.T) {
		require.NoError(t, os.Remove(filepath.Join(w.scratch, "release")))
		require.NoError(t, os.Remove(filepath.Join(w.scratch, "hold.waiting")))
		var out runOutput
		w.runJSON(0, &out, "pipeline", "run", "rl", "--json")
		waitFor(t, waitTimeout, "hold to run", func() bool { _, err := os.Stat(filepath.Join(w.scratch, "hold.waiting")); return err == nil })
		r := w.run("job", "cancel", out.JobID, "--json")
		require.Equal(t, 0, r.code, "%s", r)
		run := w.waitRun(l, "rl to finish", func(r *pipeRun) bool { return r.ID == out.RunID })
		require.Equal(t, events.RunFailed, run.Finished.Status)
		require.Equal(t, []string{"h"}, run.nodes())
		require.Equal(t, 1, run.FinishedCount)
	})

	t.Run("false if on a split", func(t *testing.T) {
		out := w.runPipeline("sgate", `{"go":false}`, 0)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		require.Equal(t, []string{"after"}, r.nodes())
		requireEvent(t, w.mustRequest(r.node(t, "after").ID), "ductile.pipeline", `{"go":false}`)
		out = w.runPipeline("sgate", `{"go":true}`, 0)
		runs, _ = w.facts(l)
		r = runs[out.RunID]
		require.Len(t, r.nodes(), 3)
	})

	t.Run("with templates", func(t *testing.T) {
		out := w.runPipeline("tmpl", `{"url":"U","obj":{"k":[1,2]}}`, 0)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		requireEvent(t, w.mustRequest(r.node(t, "w").ID), "ductile.pipeline", `{"u":"U","s":"x U","n":3,"o":{"k":[1,2]}}`)
	})

	t.Run("timed out hook", func(t *testing.T) {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "sleepy", "--command", "handle", "--json")
		r := w.waitRun(l, "the timed-out hook", func(r *pipeRun) bool { return r.Started.Pipeline == "ontimeout" })
		req := w.mustRequest(r.node(t, "t").ID)
		require.Equal(t, "job.timed_out", req.Event.Type)
		var p map[string]any
		require.NoError(t, json.Unmarshal(req.Event.Payload, &p))
		require.Equal(t, run.JobID, p["job_id"])
		require.Equal(t, "dead", p["status"])
		runs, _ := w.facts(l)
		for _, r := range runs {
			require.NotEqual(t, "onfailed", r.Started.Pipeline)
		}
	})

	t.Run("hook loop capped", func(t *testing.T) {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "loopy", "--command", "handle", "--json")
		waitFor(t, 3*waitTimeout, "4 loopy jobs, all ended", func() bool {
			_, jobs := w.facts(l)
			n := 0
			for _, j := range jobs {
				if j.Enq.Plugin == "loopy" && j.Status == "succeeded" {
					n++
				}
			}
			return n == 4
		})
		_, jobs := w.facts(l)
		n := 0
		for _, j := range jobs {
			if j.Enq.Plugin == "loopy" {
				n++
			}
		}
		require.Equal(t, 4, n)
	})

	w.stopDaemon(d)
	w.replayAndVerify()
}
