package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// TestPipelineJoinsE2E: joins of skipped branches, of a branch whose
// step ran once per emitted event, and of branches' baggage (merged, or
// conflicting: the join ends dead).
func TestPipelineJoinsE2E(t *testing.T) {
	t.Parallel()
	plugins := []stepPlugin{{name: "b"}, {name: "c"}, {name: "d"},
		{name: "two", response: `{"status":"ok","result":"two","events":[{"type":"t","payload":{"i":1}},{"type":"t","payload":{"i":2}}]}`},
		{name: "z1", response: emits("z", `{"v":"one"}`)}, {name: "z2", response: emits("z", `{"v":"two"}`)}}
	w := newPipeWorld(t, plugins, `
plugin_roots: ["$ROOT"]
service: {max_workers: 4}
pipelines:
  - name: allskip
    steps:
      - {id: s, uses: b, if: {path: payload.go, op: exists}}
  - name: skipbranches
    steps:
      - id: sp
        split:
          - {id: x, uses: b, if: {path: payload.go, op: exists}}
          - {id: y, uses: c, if: {path: payload.go, op: exists}}
      - {id: after, uses: d}
  - name: multi
    steps:
      - id: sp
        split:
          - steps: [{id: m, uses: two}, {id: each, uses: c}]
          - {id: other, uses: b}
      - {id: join, uses: d}
  - name: merge
    steps:
      - id: sp
        split:
          - {id: x, uses: b, baggage: {a.x: payload.x}}
          - {id: y, uses: c, baggage: {a.y: payload.y}}
      - {id: join, uses: d}
  - name: conflict
    steps:
      - id: sp
        split:
          - steps: [{id: p, uses: z1}, {id: x, uses: b, baggage: {a.v: payload.v}}]
          - steps: [{id: q, uses: z2}, {id: y, uses: c, baggage: {a.v: payload.v}}]
      - {id: join, uses: d}
`)
	d := w.startDaemon()
	l := openLedger(t, w.state)

	t.Run("all skipped", func(t *testing.T) {
		out := w.runPipeline("allskip", `{}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status)
	})
	t.Run("skipped branches", func(t *testing.T) {
		out := w.runPipeline("skipbranches", `{}`, 0)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		require.Equal(t, []string{"after"}, r.nodes())
		req := w.mustRequest(r.node(t, "after").ID)
		requireEvent(t, req, "ductile.join", `{"branches":[{"branch":0,"node":"x","job_id":"","status":"skipped","result":null,"events":[]},`+
			`{"branch":1,"node":"y","job_id":"","status":"skipped","result":null,"events":[]}]}`)
	})
	t.Run("multi", func(t *testing.T) {
		out := w.runPipeline("multi", `{}`, 0)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		require.ElementsMatch(t, []string{"m", "other", "each", "each", "join"}, r.nodes(), "the step after m runs once per event m emitted")
		join := r.node(t, "join")
		req := w.mustRequest(join.ID)
		var j struct {
			Branches []json.RawMessage `json:"branches"`
		}
		require.NoError(t, json.Unmarshal(req.Event.Payload, &j))
		require.Len(t, j.Branches, 3)
	})
	t.Run("merge", func(t *testing.T) {
		out := w.runPipeline("merge", `{"x":1,"y":2}`, 0)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		require.JSONEq(t, `{"a":{"x":1,"y":2}}`, string(w.mustRequest(r.node(t, "join").ID).Context))
	})
	t.Run("conflict", func(t *testing.T) {
		out := w.runPipeline("conflict", `{}`, 1)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		j := r.node(t, "join")
		require.Equal(t, "dead", j.Status)
		require.Regexp(t, `context\.a\.v from "(one|two)" to "(one|two)"`, j.Reason, "the branches' order of ending decides which value is first")
		require.Zero(t, j.Count[events.JobStarted], "the join's plugin never ran")
	})
	w.stopDaemon(d)
	w.replayAndVerify()
}
