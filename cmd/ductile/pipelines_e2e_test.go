package main_test

// End-to-end proof of pipelines (issue 15) on the real binary: small shell
// plugins save each request they receive (request.event, request.context)
// under <dir>/<job_id>.json, and the test asserts what each step received
// and what the ledger recorded (job and run streams), never a sleep.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// stepPlugin is a shell plugin for pipeline tests: it saves its request
// to dir/<job_id>.json, optionally sleeps (or waits for dir/release, having
// written dir/<name>.waiting), and answers response.
type stepPlugin struct {
	name     string
	response string // the response line; default ok with result "<name>-result"
	sleep    string // seconds, for sleep(1)
	waitFile bool   // wait for dir/release instead
}

func writeStepPlugin(t *testing.T, root, dir string, p stepPlugin) {
	t.Helper()
	pdir := filepath.Join(root, p.name)
	require.NoError(t, os.MkdirAll(pdir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(pdir, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\nname: "+p.name+
		"\nversion: 0.1.0\nprotocol: 2\nentrypoint: run.sh\ncommands: {handle: {type: write}}\n"), 0o644))
	resp := p.response
	if resp == "" {
		resp = `{"status":"ok","result":"` + p.name + `-result"}`
	}
	script := "#!/bin/sh\nreq=$(cat)\n" +
		"id=$(printf '%s' \"$req\" | sed -n 's/^{\"protocol\":2,\"job_id\":\"\\([^\"]*\\)\".*/\\1/p')\n" +
		"printf '%s\\n' \"$req\" >'" + dir + "'/\"$id\".json\n"
	if p.sleep != "" {
		script += "sleep " + p.sleep + "\n"
	}
	if p.waitFile {
		script += "touch '" + dir + "/" + p.name + ".waiting'\n" +
			"i=0\nwhile [ ! -e '" + dir + "/release' ] && [ \"$i\" -lt 600 ]; do sleep 0.05; i=$((i + 1)); done\n"
	}
	script += "printf '%s\\n' '" + resp + "'\n"
	require.NoError(t, os.WriteFile(filepath.Join(pdir, "run.sh"), []byte(script), 0o755))
}

// emits is an ok response with one event.
func emits(typ, payload string) string {
	return `{"status":"ok","result":"emitted ` + typ + `","events":[{"type":"` + typ + `","payload":` + payload + `}]}`
}

// pipeWorld is a world of step plugins under a fresh root, with their
// requests saved in a scratch directory.
type pipeWorld struct {
	*jobWorld
	root string
}

func newPipeWorld(t *testing.T, plugins []stepPlugin, yaml string) *pipeWorld {
	t.Helper()
	root := t.TempDir()
	w := &pipeWorld{jobWorld: newJobWorld(t, strings.ReplaceAll(yaml, "$ROOT", root)), root: root}
	for _, p := range plugins {
		writeStepPlugin(t, root, w.scratch, p)
	}
	return w
}

// request is what a step plugin received.
type request struct {
	JobID   string          `json:"job_id"`
	Context json.RawMessage `json:"context"`
	Event   struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
		Source  string          `json:"source"`
	} `json:"event"`
}

// request reads the request job id's plugin saved; ok false if it never ran.
func (w *pipeWorld) request(id string) (request, bool) {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.scratch, id+".json"))
	if os.IsNotExist(err) {
		return request{}, false
	}
	require.NoError(w.t, err)
	var r request
	require.NoError(w.t, json.Unmarshal(b, &r), "%s", b)
	return r, true
}

func (w *pipeWorld) mustRequest(id string) request {
	w.t.Helper()
	r, ok := w.request(id)
	require.True(w.t, ok, "the plugin of job %s ran", id)
	return r
}

// pipeJob is one pipeline step's job as the ledger recorded it.
type pipeJob struct {
	ID     string
	Enq    events.Enqueued
	Seq    map[string]int64 // event type → seq of its last one
	Count  map[string]int   // event type → how many
	Status string
	Reason string // job.dead's reason
}

// pipeRun is one run as the ledger recorded it.
type pipeRun struct {
	ID            string
	Started       events.RunStarted
	StartedSeq    int64
	Finished      events.RunFinishedData
	FinishedSeq   int64
	FinishedCount int
	StepEnded     []events.StepEndedData
	Jobs          []*pipeJob // in enqueue order
}

// node is the run's only job at node (fails if none or several).
func (r *pipeRun) node(t *testing.T, node string) *pipeJob {
	t.Helper()
	var found []*pipeJob
	for _, j := range r.Jobs {
		if j.Enq.Pipeline.Node == node {
			found = append(found, j)
		}
	}
	require.Len(t, found, 1, "jobs at node %s of run %s (nodes: %v)", node, r.ID, r.nodes())
	return found[0]
}

func (r *pipeRun) nodes() []string {
	var out []string
	for _, j := range r.Jobs {
		out = append(out, j.Enq.Pipeline.Node)
	}
	return out
}

// skipped is every node the run bypassed.
func (r *pipeRun) skipped() []string {
	var out []string
	for _, s := range r.Started.Skipped {
		out = append(out, s.Node)
	}
	for _, e := range r.StepEnded {
		for _, s := range e.Skipped {
			out = append(out, s.Node)
		}
	}
	return out
}

// ledgerFacts folds the pipeline runs and their jobs from evs.
func ledgerFacts(t *testing.T, evs []ledger.Event) (map[string]*pipeRun, map[string]*pipeJob) {
	t.Helper()
	runs := map[string]*pipeRun{}
	jobs := map[string]*pipeJob{}
	run := func(id string) *pipeRun {
		if runs[id] == nil {
			runs[id] = &pipeRun{ID: id}
		}
		return runs[id]
	}
	status := map[string]string{events.JobEnqueued: "queued", events.JobStarted: "running", events.JobSucceeded: "succeeded",
		events.JobDead: "dead", events.JobCanceled: "canceled", events.JobFailed: "queued", events.JobRecovered: "queued"}
	for _, ev := range evs {
		if id := events.JobIDFromStream(ev.Stream); id != "" {
			if ev.Type == events.JobEnqueued {
				j := &pipeJob{ID: id, Seq: map[string]int64{}, Count: map[string]int{}}
				require.NoError(t, json.Unmarshal(ev.Data, &j.Enq))
				jobs[id] = j
				if j.Enq.Pipeline != nil {
					r := run(j.Enq.Pipeline.Run)
					r.Jobs = append(r.Jobs, j)
				}
			}
			j := jobs[id]
			if j == nil {
				continue
			}
			j.Seq[ev.Type], j.Count[ev.Type] = ev.Seq, j.Count[ev.Type]+1
			if s, ok := status[ev.Type]; ok {
				j.Status = s
			}
			if ev.Type == events.JobDead {
				var d events.Dead
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				j.Reason = d.Reason
			}
			continue
		}
		switch ev.Type {
		case events.PipelineRunStarted:
			var d events.RunStarted
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			r := run(d.RunID)
			r.Started, r.StartedSeq = d, ev.Seq
		case events.PipelineStepEnded:
			var d events.StepEndedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			r := run(d.RunID)
			r.StepEnded = append(r.StepEnded, d)
		case events.PipelineRunFinished:
			var d events.RunFinishedData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			r := run(d.RunID)
			r.Finished, r.FinishedSeq, r.FinishedCount = d, ev.Seq, r.FinishedCount+1
		}
	}
	return runs, jobs
}

// runOutput is what pipeline run --json prints.
type runOutput struct {
	Pipeline string             `json:"pipeline"`
	RunID    string             `json:"run_id"`
	JobID    string             `json:"job_id"`
	Status   events.RunStatus   `json:"status"`
	Error    string             `json:"error"`
	Results  []events.RunResult `json:"results"`
}

// runPipeline runs `pipeline run NAME --payload P --wait --json` and
// requires exit code want.
func (w *pipeWorld) runPipeline(name, payload string, want int) runOutput {
	w.t.Helper()
	var out runOutput
	w.runJSON(want, &out, "pipeline", "run", name, "--payload", payload, "--wait", "--timeout", "1m", "--json")
	require.NotEmpty(w.t, out.RunID)
	return out
}

// facts reads the runs and jobs from the ledger l.
func (w *pipeWorld) facts(l *ledger.Ledger) (map[string]*pipeRun, map[string]*pipeJob) {
	w.t.Helper()
	return ledgerFacts(w.t, readAll(w.t, l))
}

// waitRun waits until a run satisfying match has finished, and returns it.
func (w *pipeWorld) waitRun(l *ledger.Ledger, what string, match func(*pipeRun) bool) *pipeRun {
	w.t.Helper()
	var found *pipeRun
	waitFor(w.t, 3*waitTimeout, what, func() bool {
		runs, _ := w.facts(l)
		for _, r := range runs {
			if r.FinishedCount > 0 && match(r) {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// requireInOrder requires each job to have succeeded once and to have
// ended before the next was enqueued.
func requireInOrder(t *testing.T, jobs ...*pipeJob) {
	t.Helper()
	for i, j := range jobs {
		require.Equal(t, "succeeded", j.Status, "job %s (%s)", j.ID, j.Enq.Pipeline.Node)
		require.Equal(t, 1, j.Count[events.JobStarted], "job %s ran once", j.ID)
		if i > 0 {
			require.Less(t, jobs[i-1].Seq[events.JobSucceeded], j.Seq[events.JobEnqueued], "%s before %s", jobs[i-1].Enq.Pipeline.Node, j.Enq.Pipeline.Node)
			require.Equal(t, jobs[i-1].ID, j.Enq.ParentJobID, "a step's job is a child of the one before it")
		}
	}
}

// requireEvent requires the request's event to be typ with payload.
func requireEvent(t *testing.T, r request, typ, payload string) {
	t.Helper()
	require.Equal(t, typ, r.Event.Type, "job %s", r.JobID)
	require.JSONEq(t, payload, string(r.Event.Payload), "job %s", r.JobID)
}

const pipelineE2EConfig = `
plugin_roots: ["$ROOT"]
service: {max_workers: 4}
plugins:
  fail: {retry: {max_attempts: 1}}
  notifier: {notify_on_complete: true}
pipelines:
  - name: chain
    on: chain.go
    steps:
      - {id: a, uses: a}
      - {id: b, uses: b}
      - {id: c, uses: c}
  - name: outer
    steps:
      - {id: first, uses: a}
      - {id: inner, call: inner}
      - {id: last, uses: c}
  - name: inner
    steps:
      - {id: one, uses: b}
      - {id: two, uses: d}
  - name: fan
    steps:
      - {id: start, uses: a}
      - id: fan
        split:
          - {id: quick, uses: b}
          - {id: slow, uses: slow}
          - steps: [{id: c1, uses: c}, {id: d1, uses: d}]
      - {id: join, uses: j}
  - name: fanfail
    steps:
      - id: fan
        split: [{id: ok, uses: b}, {id: bad, uses: fail}, {id: slow, uses: slow}]
      - {id: join, uses: j}
  - name: fanfailok
    steps:
      - id: fan
        continue_on_error: true
        split: [{id: ok, uses: b}, {id: bad, uses: fail}, {id: slow, uses: slow}]
      - {id: join, uses: j}
  - name: gate
    steps:
      - {id: gated, uses: b, if: {path: payload.go, op: eq, value: true}}
      - {id: after, uses: c}
  - name: gategroup
    steps:
      - id: group
        if: {path: payload.go, op: eq, value: true}
        steps: [{id: g1, uses: b}, {id: g2, uses: d}]
      - {id: after, uses: c}
  - name: bag
    steps:
      - {id: s1, uses: e1, baggage: {web.url: payload.url}}
      - {id: s2, uses: e2, baggage: {web.lang: payload.lang}}
      - {id: s3, uses: c, baggage: {from: payload.metadata, namespace: whisper}}
  - name: mutate
    steps:
      - {id: s1, uses: e3, baggage: {web.url: payload.url}}
      - {id: s2, uses: c, baggage: {web.url: payload.url}}
  - name: onhook
    on-hook: job.completed
    steps:
      - {id: h, uses: hookstep}
  - name: slowchain
    steps:
      - {id: s1, uses: slow}
      - id: fan
        split: [{id: x, uses: slow}, {id: y, uses: b}]
      - {id: join, uses: c}
`

func pipelinePlugins() []stepPlugin {
	return []stepPlugin{
		{name: "a", response: emits("a.done", `{"from":"a"}`)},
		{name: "b"}, {name: "c"}, {name: "d"}, {name: "j"}, {name: "hookstep"}, {name: "notifier"},
		{name: "slow", sleep: "1", response: emits("slow.done", `{"from":"slow"}`)},
		{name: "fail", response: `{"status":"error","error":"fail: on purpose","retry":false}`},
		{name: "starter", response: emits("chain.go", `{"n":2}`)},
		{name: "e1", response: emits("e1.done", `{"lang":"en"}`)},
		{name: "e2", response: emits("e2.done", `{"metadata":{"model":"small","size":3}}`)},
		{name: "e3", response: emits("e3.done", `{"url":"other"}`)},
	}
}

// TestPipelinesE2E runs every kind of pipeline step on a daemon, then
// shows a tree back in time and verifies the ledger (replay equality).
func TestPipelinesE2E(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, pipelinePlugins(), pipelineE2EConfig)
	d := w.startDaemon()
	l := openLedger(t, w.state)

	t.Run("linear chain from the CLI", func(t *testing.T) {
		out := w.runPipeline("chain", `{"n":1}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status, "%+v", out)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		require.Equal(t, events.TriggerCLI, r.Started.Trigger)
		require.Equal(t, []string{"a", "b", "c"}, r.nodes())
		a, b, c := r.node(t, "a"), r.node(t, "b"), r.node(t, "c")
		requireInOrder(t, a, b, c)
		require.Equal(t, out.JobID, a.ID, "the run's first job")
		requireEvent(t, w.mustRequest(a.ID), "ductile.pipeline", `{"n":1}`)
		requireEvent(t, w.mustRequest(b.ID), "a.done", `{"from":"a"}`)
		requireEvent(t, w.mustRequest(c.ID), "ductile.step.succeeded", `{"result":"b-result"}`)
		require.Len(t, out.Results, 1)
		require.Equal(t, c.ID, out.Results[0].JobID)
		require.JSONEq(t, `"c-result"`, string(out.Results[0].Result))
		require.Equal(t, 1, r.FinishedCount)
	})

	t.Run("linear chain from an on event", func(t *testing.T) {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "starter", "--command", "handle", "--payload", `{}`, "--json")
		r := w.waitRun(l, "the on-triggered chain to finish", func(r *pipeRun) bool { return r.Started.Trigger == "event" })
		require.Equal(t, events.RunSucceeded, r.Finished.Status)
		a, b, c := r.node(t, "a"), r.node(t, "b"), r.node(t, "c")
		requireInOrder(t, a, b, c)
		require.Equal(t, run.JobID, a.Enq.ParentJobID, "the run's first job is a child of the emitting job")
		requireEvent(t, w.mustRequest(a.ID), "chain.go", `{"n":2}`)
		requireEvent(t, w.mustRequest(b.ID), "a.done", `{"from":"a"}`)
		requireEvent(t, w.mustRequest(c.ID), "ductile.step.succeeded", `{"result":"b-result"}`)
		require.Equal(t, 1, r.FinishedCount)
	})

	t.Run("nested call", func(t *testing.T) {
		out := w.runPipeline("outer", `{"n":3}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		require.Equal(t, []string{"first", "inner/one", "inner/two", "last"}, r.nodes())
		first, one, two, last := r.node(t, "first"), r.node(t, "inner/one"), r.node(t, "inner/two"), r.node(t, "last")
		requireInOrder(t, first, one, two, last)
		requireEvent(t, w.mustRequest(one.ID), "a.done", `{"from":"a"}`)
		requireEvent(t, w.mustRequest(two.ID), "ductile.step.succeeded", `{"result":"b-result"}`)
		requireEvent(t, w.mustRequest(last.ID), "ductile.step.succeeded", `{"result":"d-result"}`)
	})

	t.Run("split and join", func(t *testing.T) {
		out := w.runPipeline("fan", `{}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status, "%+v", out)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		start, join := r.node(t, "start"), r.node(t, "join")
		branches := []*pipeJob{r.node(t, "quick"), r.node(t, "slow"), r.node(t, "d1")}
		requireInOrder(t, start, r.node(t, "quick"))
		requireInOrder(t, start, r.node(t, "slow"))
		requireInOrder(t, start, r.node(t, "c1"), r.node(t, "d1"))
		require.Equal(t, 1, join.Count[events.JobEnqueued])
		require.Equal(t, "succeeded", join.Status)
		for _, b := range append(branches, r.node(t, "c1")) {
			require.Less(t, b.Seq[events.JobSucceeded], join.Seq[events.JobEnqueued], "the join after every branch (%s)", b.Enq.Pipeline.Node)
		}
		req := w.mustRequest(join.ID)
		require.Equal(t, "ductile.join", req.Event.Type)
		var joined struct {
			Branches []struct {
				Branch int               `json:"branch"`
				Node   string            `json:"node"`
				JobID  string            `json:"job_id"`
				Status string            `json:"status"`
				Result json.RawMessage   `json:"result"`
				Events []json.RawMessage `json:"events"`
			} `json:"branches"`
		}
		require.NoError(t, json.Unmarshal(req.Event.Payload, &joined))
		require.Len(t, joined.Branches, 3, "%s", req.Event.Payload)
		byBranch := map[int]int{}
		for i, b := range joined.Branches {
			byBranch[b.Branch] = i
			require.Equal(t, "succeeded", b.Status)
		}
		for i, want := range []struct{ node, result, events string }{
			{"quick", `"b-result"`, `[]`},
			{"slow", `"emitted slow.done"`, `[{"type":"slow.done","payload":{"from":"slow"}}]`},
			{"d1", `"d-result"`, `[]`},
		} {
			got := joined.Branches[byBranch[i]]
			require.Equal(t, want.node, got.Node)
			require.Equal(t, branches[i].ID, got.JobID)
			require.JSONEq(t, want.result, string(got.Result))
			ev, err := json.Marshal(got.Events)
			require.NoError(t, err)
			require.JSONEq(t, want.events, string(ev))
		}
	})

	t.Run("a failing branch fails the run", func(t *testing.T) {
		out := w.runPipeline("fanfail", `{}`, 1)
		require.Equal(t, events.RunFailed, out.Status)
		require.Contains(t, out.Error, "fail: on purpose")
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		require.ElementsMatch(t, []string{"ok", "bad", "slow"}, r.nodes(), "no join")
		require.Equal(t, "dead", r.node(t, "bad").Status)
		require.Equal(t, "succeeded", r.node(t, "slow").Status, "the other branches finish")
	})

	t.Run("continue_on_error runs the join", func(t *testing.T) {
		out := w.runPipeline("fanfailok", `{}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status, "%+v", out)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		join := r.node(t, "join")
		require.Equal(t, "succeeded", join.Status)
		req := w.mustRequest(join.ID)
		var joined struct {
			Branches []struct {
				Node   string `json:"node"`
				Status string `json:"status"`
			} `json:"branches"`
		}
		require.NoError(t, json.Unmarshal(req.Event.Payload, &joined))
		got := map[string]string{}
		for _, b := range joined.Branches {
			got[b.Node] = b.Status
		}
		require.Equal(t, map[string]string{"ok": "succeeded", "bad": "dead", "slow": "succeeded"}, got)
	})

	t.Run("if true and false", func(t *testing.T) {
		out := w.runPipeline("gate", `{"go":true}`, 0)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		requireInOrder(t, r.node(t, "gated"), r.node(t, "after"))
		require.Empty(t, r.skipped())
		requireEvent(t, w.mustRequest(r.node(t, "after").ID), "ductile.step.succeeded", `{"result":"b-result"}`)

		out = w.runPipeline("gate", `{"go":false}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status)
		runs, _ = w.facts(l)
		r = runs[out.RunID]
		require.Equal(t, []string{"after"}, r.nodes(), "a false if makes no job")
		require.Equal(t, []string{"gated"}, r.skipped(), "the skip is recorded")
		requireEvent(t, w.mustRequest(r.node(t, "after").ID), "ductile.pipeline", `{"go":false}`)
	})

	t.Run("if on a group", func(t *testing.T) {
		out := w.runPipeline("gategroup", `{"go":true}`, 0)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		requireInOrder(t, r.node(t, "g1"), r.node(t, "g2"), r.node(t, "after"))

		out = w.runPipeline("gategroup", `{"go":false}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status)
		runs, _ = w.facts(l)
		r = runs[out.RunID]
		require.Equal(t, []string{"after"}, r.nodes(), "the whole group is bypassed")
		require.NotEmpty(t, r.skipped())
		requireEvent(t, w.mustRequest(r.node(t, "after").ID), "ductile.pipeline", `{"go":false}`)
	})

	t.Run("baggage accumulates", func(t *testing.T) {
		out := w.runPipeline("bag", `{"url":"https://example.org/v"}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status, "%+v", out)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		s1, s2, s3 := r.node(t, "s1"), r.node(t, "s2"), r.node(t, "s3")
		requireInOrder(t, s1, s2, s3)
		require.JSONEq(t, `{"web":{"url":"https://example.org/v"}}`, string(w.mustRequest(s1.ID).Context))
		require.JSONEq(t, `{"web":{"url":"https://example.org/v","lang":"en"}}`, string(w.mustRequest(s2.ID).Context))
		require.JSONEq(t, `{"web":{"url":"https://example.org/v","lang":"en"},"whisper":{"model":"small","size":3}}`,
			string(w.mustRequest(s3.ID).Context), "the third step holds every claim, the namespace import included")
		require.JSONEq(t, string(w.mustRequest(s3.ID).Context), string(s3.Enq.Context), "the job records the context its plugin receives")
	})

	t.Run("baggage is immutable", func(t *testing.T) {
		out := w.runPipeline("mutate", `{"url":"https://example.org/v"}`, 1)
		require.Equal(t, events.RunFailed, out.Status)
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		s2 := r.node(t, "s2")
		require.Equal(t, "dead", s2.Status)
		require.Zero(t, s2.Count[events.JobStarted], "its plugin never ran")
		_, ran := w.request(s2.ID)
		require.False(t, ran)
		want := `step s2: baggage claim would change context.web.url from "https://example.org/v" to "other": inherited baggage is immutable (claim a new path instead)`
		require.Equal(t, want, s2.Reason)
		require.Contains(t, out.Error, want)
	})

	t.Run("on-hook pipeline", func(t *testing.T) {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "notifier", "--command", "handle", "--payload", `{"k":"v"}`, "--json")
		r := w.waitRun(l, "the hook's run to finish", func(r *pipeRun) bool { return r.Started.Trigger == "hook" })
		require.Equal(t, events.RunSucceeded, r.Finished.Status)
		h := r.node(t, "h")
		require.Empty(t, h.Enq.ParentJobID, "a fresh root")
		require.Equal(t, 1, h.Enq.HookDepth)
		req := w.mustRequest(h.ID)
		require.JSONEq(t, `{}`, string(req.Context), "no inherited context")
		requireEvent(t, req, "job.completed", fmt.Sprintf(`{"job_id":%q,"plugin":"notifier","command":"handle","status":"succeeded","error":"","result":"notifier-result"}`, run.JobID))
	})

	t.Run("job tree at three moments", func(t *testing.T) {
		out := w.runPipeline("slowchain", `{}`, 0)
		require.Equal(t, events.RunSucceeded, out.Status, "%+v", out)
		evs := readAll(t, l)
		runs, _ := ledgerFacts(t, evs)
		r := runs[out.RunID]
		s1, x, join := r.node(t, "s1"), r.node(t, "x"), r.node(t, "join")
		inRun := map[string]string{} // job id → node
		for _, j := range r.Jobs {
			inRun[j.ID] = j.Enq.Pipeline.Node
		}
		// What each job's events up to seq say its status is.
		statusAt := func(seq int64) map[string]string {
			status := map[string]string{events.JobEnqueued: "queued", events.JobStarted: "running", events.JobSucceeded: "succeeded"}
			out := map[string]string{}
			for _, ev := range evs {
				node, ok := inRun[events.JobIDFromStream(ev.Stream)]
				if !ok || ev.Seq > seq {
					continue
				}
				s, known := status[ev.Type]
				require.True(t, known, "event %s of a job that succeeded at once", ev.Type)
				out[node] = s
			}
			return out
		}
		moments := []int64{s1.Seq[events.JobStarted], x.Seq[events.JobStarted], join.Seq[events.JobSucceeded]}
		require.Equal(t, map[string]string{"s1": "running"}, statusAt(moments[0]))
		require.Equal(t, "succeeded", statusAt(moments[1])["s1"])
		require.Equal(t, "running", statusAt(moments[1])["x"])
		require.NotContains(t, statusAt(moments[1]), "join")
		require.Len(t, statusAt(moments[2]), 4)
		for _, seq := range moments {
			var at treeView
			w.runJSON(0, &at, "job", "tree", s1.ID, "--at", strconv.FormatInt(seq, 10), "--json")
			require.Equal(t, seq, at.AtSeq)
			got := map[string]string{}
			for _, j := range at.Jobs {
				got[inRun[j.ID]] = j.Status
			}
			require.Equal(t, statusAt(seq), got, "the tree at seq %d", seq)
		}
	})

	w.stopDaemon(d)
	t.Run("ledger verifies and replays", func(t *testing.T) {
		runs, _ := w.facts(l)
		for _, r := range runs {
			require.Equal(t, 1, r.FinishedCount, "run %s (%s) finished once", r.ID, r.Started.Pipeline)
		}
		w.replayAndVerify()
	})
}

// TestPipelineJoinSurvivesSIGKILL kills the daemon while a split's slow
// branch runs (the other two have ended), starts another: the slow branch
// is recovered and run again, the join runs exactly once, and the run
// finishes once.
func TestPipelineJoinSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, []stepPlugin{{name: "b"}, {name: "c"}, {name: "j"}, {name: "hold", waitFile: true}}, `
plugin_roots: ["$ROOT"]
service: {max_workers: 4}
plugins:
  hold: {retry: {max_attempts: 3, backoff_base: 10ms}}
pipelines:
  - name: fan
    steps:
      - id: fan
        split: [{id: quick, uses: b}, {id: held, uses: hold}, {id: other, uses: c}]
      - {id: join, uses: j}
`)
	d := w.startDaemon()
	l := openLedgerSync(t, w.state, "FULL")
	var out runOutput
	w.runJSON(0, &out, "pipeline", "run", "fan", "--json")
	waitFor(t, 3*waitTimeout, "the held branch to run and the others to end", func() bool {
		if _, err := os.Stat(filepath.Join(w.scratch, "hold.waiting")); err != nil {
			return false
		}
		runs, _ := w.facts(l)
		r := runs[out.RunID]
		return r != nil && len(r.Jobs) == 3 && r.node(t, "quick").Status == "succeeded" && r.node(t, "other").Status == "succeeded"
	})
	require.Equal(t, -1, d.signal(t, syscall.SIGKILL))
	runs, _ := w.facts(l)
	held := runs[out.RunID].node(t, "held")
	require.Equal(t, "running", held.Status, "killed mid-run")
	require.Zero(t, runs[out.RunID].FinishedCount)

	d = w.startDaemon()
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "release"), nil, 0o644))
	r := w.waitRun(l, "the run to finish", func(r *pipeRun) bool { return r.ID == out.RunID })
	w.stopDaemon(d)

	runs, _ = w.facts(l)
	r = runs[out.RunID]
	require.Equal(t, events.RunSucceeded, r.Finished.Status, "%+v", r.Finished)
	require.Equal(t, 1, r.FinishedCount, "pipeline.run_finished exactly once")
	var joins []*pipeJob
	for _, j := range r.Jobs {
		if j.Enq.Pipeline.Node == "join" {
			joins = append(joins, j)
		}
	}
	require.Len(t, joins, 1, "the join is enqueued exactly once")
	require.Equal(t, 1, joins[0].Count[events.JobEnqueued])
	require.Equal(t, "succeeded", joins[0].Status)
	held = r.node(t, "held")
	require.Equal(t, 1, held.Count[events.JobRecovered], "the held branch was recovered")
	require.Equal(t, "succeeded", held.Status)
	require.Less(t, held.Seq[events.JobSucceeded], joins[0].Seq[events.JobEnqueued])
	var joined struct {
		Branches []struct {
			Node string `json:"node"`
		} `json:"branches"`
	}
	require.NoError(t, json.Unmarshal(w.mustRequest(joins[0].ID).Event.Payload, &joined))
	var nodes []string
	for _, b := range joined.Branches {
		nodes = append(nodes, b.Node)
	}
	slices.Sort(nodes)
	require.Equal(t, []string{"held", "other", "quick"}, nodes, "the join sees every branch once")
	w.replayAndVerify()
}
