package commands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// Pipelines here are built by hand as their compiled form: the runtime's
// tests do not depend on the compiler's parsing.

// uses is a uses node of plugin p (command handle) followed by next.
func uses(id, p, next string) *pipeline.Node {
	return &pipeline.Node{ID: id, Kind: pipeline.KindUses, Plugin: p, Command: "handle", Next: next}
}

// graphs numbers the graphs made: each has a hash of its own, as each
// compiled form would (the runtime caches compiled forms by hash).
var graphs atomic.Int64

// graph is a compiled pipeline of nodes, entered at entry.
func graph(name, entry string, nodes ...*pipeline.Node) *pipeline.Pipeline {
	pl := &pipeline.Pipeline{Name: name, Entry: entry, ExecutionMode: pipeline.ModeAsync, MaxDepth: pipeline.DefaultMaxDepth,
		Nodes: map[string]*pipeline.Node{}, Hash: fmt.Sprintf("blake3:%s-%d", name, graphs.Add(1))}
	for _, n := range nodes {
		pl.Nodes[n.ID] = n
	}
	return pl
}

// linear is a → b → c.
func linear() *pipeline.Pipeline {
	return graph("linear", "a", uses("a", "pa", "b"), uses("b", "pb", "c"), uses("c", "pc", ""))
}

// fanout is split{b0, b1, b2} then join.
func fanout(continueOnError bool) *pipeline.Pipeline {
	return graph("fanout", "split",
		&pipeline.Node{ID: "split", Kind: pipeline.KindSplit, Branches: []string{"b0", "b1", "b2"}, Next: "join", ContinueOnError: continueOnError},
		uses("b0", "p0", ""), uses("b1", "p1", ""), uses("b2", "p2", ""), uses("join", "pj", ""))
}

func startRun(t *testing.T, b *testBundle, pl *pipeline.Pipeline, payload string) commands.RunStartedResult {
	t.Helper()
	res, err := commands.StartPipeline(b.ctx, b.l, commands.StartRun{Pipeline: pl, Trigger: events.TriggerAPI, Payload: raw(payload),
		SubmittedBy: "api", Config: config.Default(), Now: now})
	require.NoError(t, err)
	return res
}

// runOne starts the job and records its attempt's outcome.
func runOne(t *testing.T, b *testBundle, id string, out commands.Outcome, p *commands.Pipelines) commands.CompleteResult {
	t.Helper()
	st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: now})
	require.NoError(t, err)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: id, Attempt: st.Job.Attempt, Outcome: out, Now: now, Pipelines: p})
	require.NoError(t, err)
	return res
}

func ok(result string) commands.Outcome {
	return commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","result":` + result + `}`)}
}

func dead(msg string) commands.Outcome {
	return commands.Outcome{Kind: events.OutcomeError, Error: msg, Retryable: false}
}

// runEvents are the run's stream.
func runEvents(t *testing.T, b *testBundle, runID string) []ledger.Event {
	t.Helper()
	evs, err := b.l.ReadStream(b.ctx, events.RunStream(runID))
	require.NoError(t, err)
	return evs
}

// progress is what the newest event of the run's stream did.
func progress(t *testing.T, b *testBundle, runID string) events.RunProgress {
	t.Helper()
	evs := runEvents(t, b, runID)
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Type {
		case events.PipelineRunStarted:
			var d events.RunStarted
			require.NoError(t, json.Unmarshal(evs[i].Data, &d))
			return d.RunProgress
		case events.PipelineStepEnded:
			var d events.StepEndedData
			require.NoError(t, json.Unmarshal(evs[i].Data, &d))
			return d.RunProgress
		}
	}
	t.Fatalf("run %s has no progress", runID)
	return events.RunProgress{}
}

// finished is the run's run_finished, or nil.
func finished(t *testing.T, b *testBundle, runID string) *events.RunFinishedData {
	t.Helper()
	evs := runEvents(t, b, runID)
	var out *events.RunFinishedData
	for _, ev := range evs {
		if ev.Type == events.PipelineRunFinished {
			require.Nil(t, out, "run_finished twice")
			out = &events.RunFinishedData{}
			require.NoError(t, json.Unmarshal(ev.Data, out))
		}
	}
	return out
}

// enqueuedAt is the job the newest progress enqueued at node.
func enqueuedAt(t *testing.T, b *testBundle, runID, node string) string {
	t.Helper()
	for _, j := range progress(t, b, runID).Enqueued {
		if j.Node == node {
			return j.JobID
		}
	}
	t.Fatalf("no job enqueued at %s: %+v", node, progress(t, b, runID))
	return ""
}

func TestPipelineLinearChain(t *testing.T) {
	b := setup(t)
	pl := linear()
	run := startRun(t, b, pl, `{"n":1}`)
	require.NotEmpty(t, run.JobID)
	require.Equal(t, run.JobID, enqueuedAt(t, b, run.RunID, "a"))

	// pipeline.compiled is recorded once per hash.
	startRun(t, b, pl, `{}`)
	compiled, err := b.l.ReadStream(b.ctx, events.PipelineVersionStream("linear", pl.Hash))
	require.NoError(t, err)
	require.Len(t, compiled, 1)

	a := b.fold(t, run.JobID)
	require.Equal(t, &events.PipelineStep{Run: run.RunID, Pipeline: "linear", Hash: pl.Hash, Node: "a"}, a.Pipeline)
	require.JSONEq(t, `{"type":"ductile.pipeline","payload":{"n":1},"event_id":"`+a.JobID+`","source":"pipeline:linear","timestamp":"`+at(0)+`"}`, string(a.Event))

	runOne(t, b, run.JobID, ok(`"one"`), nil)
	jb := enqueuedAt(t, b, run.RunID, "b")
	bj := b.fold(t, jb)
	require.Equal(t, run.JobID, bj.ParentJobID)
	require.Equal(t, run.JobID, bj.Correlation)
	require.Equal(t, 1, bj.Depth)
	require.JSONEq(t, `{"result":"one"}`, string(bj.Payload))
	require.Nil(t, finished(t, b, run.RunID))

	// b emits two events: c runs once per event.
	runOne(t, b, jb, commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","events":[{"type":"x","payload":{"i":1}},{"type":"x","payload":{"i":2}}]}`)}, nil)
	p := progress(t, b, run.RunID)
	require.Len(t, p.Enqueued, 2)
	require.Equal(t, 2, p.State.Outstanding)
	c1 := b.fold(t, p.Enqueued[0].JobID)
	require.JSONEq(t, `{"i":1}`, string(c1.Payload))
	require.Equal(t, 2, c1.Depth)

	runOne(t, b, p.Enqueued[0].JobID, ok(`"c1"`), nil)
	require.Nil(t, finished(t, b, run.RunID))
	runOne(t, b, p.Enqueued[1].JobID, ok(`{"k":"c2"}`), nil)
	fin := finished(t, b, run.RunID)
	require.NotNil(t, fin)
	require.Equal(t, events.RunSucceeded, fin.Status)
	require.Len(t, fin.Results, 2)
	require.Equal(t, p.Enqueued[0].JobID, fin.Results[0].JobID)
	require.JSONEq(t, `"c1"`, string(fin.Results[0].Result))
	require.JSONEq(t, `{"k":"c2"}`, string(fin.Results[1].Result))
	require.Equal(t, "pc", fin.Results[1].Plugin)
}

// reopen closes the ledger and opens its file again, as a restart would.
func reopen(t *testing.T, b *testBundle, path string) {
	t.Helper()
	require.NoError(t, b.l.Close())
	l, err := ledger.Open(context.Background(), path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	b.l = l
}

func TestPipelineSplitJoinOnceAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ductile.db")
	l, err := ledger.Open(context.Background(), path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	b := &testBundle{ctx: context.Background(), l: l}
	t.Cleanup(func() { require.NoError(t, b.l.Close()) })

	pl := fanout(false)
	run := startRun(t, b, pl, `{"url":"u"}`)
	p := progress(t, b, run.RunID)
	require.Len(t, p.Enqueued, 3)
	require.Len(t, p.Opened, 1)
	split := p.Opened[0]
	require.Equal(t, 3, p.State.Outstanding)
	require.Equal(t, 3, p.State.Splits[0].Outstanding)
	jobs := map[string]string{}
	for _, j := range p.Enqueued {
		jobs[j.Node] = j.JobID
		job := b.fold(t, j.JobID)
		require.Equal(t, []string{split}, job.Pipeline.Splits)
		require.JSONEq(t, `{"url":"u"}`, string(job.Payload))
	}
	require.Equal(t, jobs["b0"], run.JobID)

	// The branches end in separate decisions, the ledger reopened between
	// them, the middle one last.
	runOne(t, b, jobs["b2"], ok(`"two"`), nil)
	reopen(t, b, path)
	runOne(t, b, jobs["b0"], commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","result":"zero","events":[{"type":"found","payload":{"n":0}}]}`)}, nil)
	require.Empty(t, progress(t, b, run.RunID).Enqueued)
	require.Equal(t, 1, progress(t, b, run.RunID).State.Splits[0].Outstanding)
	reopen(t, b, path)
	runOne(t, b, jobs["b1"], ok(`"one"`), nil)

	p = progress(t, b, run.RunID)
	require.Equal(t, []events.ClosedSplit{{Split: split, Node: "split", Status: events.SplitJoined}}, p.Closed)
	require.Len(t, p.Enqueued, 1)
	join := b.fold(t, p.Enqueued[0].JobID)
	require.Equal(t, "join", join.Pipeline.Node)
	require.Empty(t, join.Pipeline.Splits)
	require.Equal(t, jobs["b1"], join.ParentJobID)
	require.JSONEq(t, `{"branches":[
		{"branch":2,"node":"b2","job_id":"`+jobs["b2"]+`","status":"succeeded","result":"two","events":[]},
		{"branch":0,"node":"b0","job_id":"`+jobs["b0"]+`","status":"succeeded","result":"zero","events":[{"type":"found","payload":{"n":0}}]},
		{"branch":1,"node":"b1","job_id":"`+jobs["b1"]+`","status":"succeeded","result":"one","events":[]}]}`, string(join.Payload))
	var env events.Envelope
	require.NoError(t, json.Unmarshal(join.Event, &env))
	require.Equal(t, commands.EventJoin, env.Type)

	require.Nil(t, finished(t, b, run.RunID))
	runOne(t, b, join.JobID, ok(`"joined"`), nil)
	fin := finished(t, b, run.RunID)
	require.Equal(t, events.RunSucceeded, fin.Status)
	require.Len(t, fin.Results, 1)
	require.Equal(t, join.JobID, fin.Results[0].JobID)

	// Exactly one join job in the whole ledger.
	joins := 0
	for _, ev := range b.since(t, 0) {
		if ev.Type == events.JobEnqueued {
			var d events.Enqueued
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			if d.Pipeline != nil && d.Pipeline.Node == "join" {
				joins++
			}
		}
	}
	require.Equal(t, 1, joins)
}

func TestPipelineFailedBranch(t *testing.T) {
	for _, continueOnError := range []bool{false, true} {
		t.Run(map[bool]string{false: "fails the join", true: "continue_on_error"}[continueOnError], func(t *testing.T) {
			b := setup(t)
			run := startRun(t, b, fanout(continueOnError), `{}`)
			jobs := map[string]string{}
			for _, j := range progress(t, b, run.RunID).Enqueued {
				jobs[j.Node] = j.JobID
			}
			runOne(t, b, jobs["b0"], ok(`"zero"`), nil)
			res := runOne(t, b, jobs["b1"], dead("boom"), nil)
			require.Equal(t, events.StatusDead, res.Status)
			runOne(t, b, jobs["b2"], ok(`"two"`), nil)
			p := progress(t, b, run.RunID)
			if !continueOnError {
				require.Empty(t, p.Enqueued, "the join is not run")
				require.Equal(t, events.SplitFailed, p.Closed[0].Status)
				fin := finished(t, b, run.RunID)
				require.Equal(t, events.RunFailed, fin.Status)
				require.Contains(t, fin.Error, "branch 1 (step b1) ended dead: boom")
				return
			}
			require.Len(t, p.Enqueued, 1)
			join := b.fold(t, p.Enqueued[0].JobID)
			require.Contains(t, string(join.Payload), `"status":"dead"`)
			require.Nil(t, finished(t, b, run.RunID))
			runOne(t, b, join.JobID, ok(`"ok"`), nil)
			require.Equal(t, events.RunSucceeded, finished(t, b, run.RunID).Status)
		})
	}
}

func TestPipelineFailedStepFailsTheRun(t *testing.T) {
	b := setup(t)
	run := startRun(t, b, linear(), `{}`)
	runOne(t, b, run.JobID, dead("no"), nil)
	fin := finished(t, b, run.RunID)
	require.Equal(t, events.RunFailed, fin.Status)
	require.Equal(t, []events.RunResult{{JobID: run.JobID, Node: "a", Plugin: "pa", Command: "handle", Status: events.StatusDead, Error: "no"}}, fin.Results)
}

func TestPipelineCancelAndRecoverEndTheStep(t *testing.T) {
	b := setup(t)
	run := startRun(t, b, fanout(true), `{}`)
	jobs := map[string]string{}
	for _, j := range progress(t, b, run.RunID).Enqueued {
		jobs[j.Node] = j.JobID
	}
	// b0 canceled while queued; b1 left running by a dead process on its
	// last attempt; b2 succeeds.
	status, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: jobs["b0"], Reason: "not needed", Now: now})
	require.NoError(t, err)
	require.Equal(t, events.StatusCanceled, status)
	for attempt := 1; ; attempt++ {
		_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobs["b1"], Timeout: time.Minute, PID: 1, Now: now})
		require.NoError(t, err)
		rec, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: jobs["b1"], Now: now})
		require.NoError(t, err)
		if rec.Status == events.StatusDead {
			break
		}
		require.Less(t, attempt, 10)
	}
	require.Empty(t, progress(t, b, run.RunID).Enqueued)
	runOne(t, b, jobs["b2"], ok(`"two"`), nil)
	join := b.fold(t, enqueuedAt(t, b, run.RunID, "join"))
	var in struct {
		Branches []struct {
			Node   string        `json:"node"`
			Status events.Status `json:"status"`
		} `json:"branches"`
	}
	require.NoError(t, json.Unmarshal(join.Payload, &in))
	require.Len(t, in.Branches, 3)
	require.Equal(t, events.StatusCanceled, in.Branches[0].Status)
	require.Equal(t, events.StatusDead, in.Branches[1].Status)
}

func TestPipelineMaxDepth(t *testing.T) {
	b := setup(t)
	pl := linear()
	pl.MaxDepth = 1
	run := startRun(t, b, pl, `{}`)
	runOne(t, b, run.JobID, ok(`"a"`), nil)
	jb := enqueuedAt(t, b, run.RunID, "b")
	runOne(t, b, jb, ok(`"b"`), nil)
	p := progress(t, b, run.RunID)
	require.Empty(t, p.Enqueued)
	require.Equal(t, []events.DroppedStep{{Node: "c", Depth: 2, Limit: 1,
		Reason: "depth 2 would pass the pipeline's max_depth (1): the step is not run"}}, p.Dropped)
	fin := finished(t, b, run.RunID)
	require.Equal(t, events.RunFailed, fin.Status)
}

func TestPipelineNestedSplitWithoutJoin(t *testing.T) {
	b := setup(t)
	pl := graph("nested", "outer",
		&pipeline.Node{ID: "outer", Kind: pipeline.KindSplit, Branches: []string{"inner", "x"}, Next: "join"},
		&pipeline.Node{ID: "inner", Kind: pipeline.KindSplit, Branches: []string{"y", "z"}},
		uses("x", "px", ""), uses("y", "py", ""), uses("z", "pz", ""), uses("join", "pj", ""))
	run := startRun(t, b, pl, `{}`)
	p := progress(t, b, run.RunID)
	require.Len(t, p.Opened, 2)
	require.Len(t, p.Enqueued, 3)
	for _, j := range p.Enqueued {
		runOne(t, b, j.JobID, ok(`"`+j.Node+`"`), nil)
	}
	join := b.fold(t, enqueuedAt(t, b, run.RunID, "join"))
	var in struct {
		Branches []struct {
			Branch int    `json:"branch"`
			Node   string `json:"node"`
		} `json:"branches"`
	}
	require.NoError(t, json.Unmarshal(join.Payload, &in))
	require.Len(t, in.Branches, 3, "the inner split's ends are the outer's branch 0")
	runOne(t, b, join.JobID, ok(`"j"`), nil)
	require.Equal(t, events.RunSucceeded, finished(t, b, run.RunID).Status)
}

func TestPipelineOnTrigger(t *testing.T) {
	b := setup(t)
	pl := graph("watch", "a", uses("a", "pa", ""))
	pl.On = "file.found"
	set := &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{"watch": pl}}
	cfg := config.Default()
	res, err := commands.EnqueueJob(b.ctx, b.l, commands.JobFor(cfg, "scanner", "poll", events.ActorCLI))
	require.NoError(t, err)
	runOne(t, b, res.JobID, commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","events":[{"type":"file.found","payload":{"path":"/x"}}]}`)},
		&commands.Pipelines{Set: set, Config: cfg})
	var started events.RunStarted
	for _, ev := range b.since(t, 0) {
		if ev.Type == events.PipelineRunStarted {
			require.NoError(t, json.Unmarshal(ev.Data, &started))
		}
	}
	require.Equal(t, events.TriggerEvent, started.Trigger)
	first := b.fold(t, started.JobID)
	require.Equal(t, res.JobID, first.ParentJobID)
	require.Equal(t, 1, first.Depth)
	require.Equal(t, res.JobID, first.Correlation)
	require.JSONEq(t, `{"path":"/x"}`, string(first.Payload))
}

func TestPipelineHooks(t *testing.T) {
	b := setup(t)
	pl := graph("audit", "a", uses("a", "auditor", ""))
	pl.OnHook = pipeline.HookCompleted
	set := &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{"audit": pl}}
	cfg := config.Default()
	pc := config.DefaultPlugin()
	pc.NotifyOnComplete = true
	cfg.Plugins["watched"] = pc
	p := &commands.Pipelines{Set: set, Config: cfg}

	for _, hookDepth := range []int{0, 3} {
		enq := commands.JobFor(cfg, "watched", "handle", events.ActorCLI)
		enq.HookDepth = hookDepth
		res, err := commands.EnqueueJob(b.ctx, b.l, enq)
		require.NoError(t, err)
		mark := b.mark(t)
		runOne(t, b, res.JobID, ok(`"done"`), p)
		var started *events.RunStarted
		var ended events.AttemptEnded
		for _, ev := range b.since(t, mark) {
			switch ev.Type {
			case events.PipelineRunStarted:
				started = &events.RunStarted{}
				require.NoError(t, json.Unmarshal(ev.Data, started))
			case events.JobSucceeded:
				require.NoError(t, json.Unmarshal(ev.Data, &ended))
			}
		}
		if hookDepth == 3 {
			require.Nil(t, started, "past service.max_hook_depth no hook fires")
			require.Len(t, ended.DroppedRoutes, 1)
			require.Equal(t, 4, ended.DroppedRoutes[0].Depth)
			continue
		}
		require.NotNil(t, started)
		require.Equal(t, events.TriggerHook, started.Trigger)
		first := b.fold(t, started.JobID)
		require.Equal(t, 1, first.HookDepth)
		require.Empty(t, first.ParentJobID)
		require.Empty(t, first.Context)
		require.JSONEq(t, `{"job_id":"`+res.JobID+`","plugin":"watched","command":"handle","status":"succeeded","error":"","result":"done"}`, string(first.Payload))
	}
}

func TestPipelineLookupFallsBackToTheLedger(t *testing.T) {
	b := setup(t)
	old := linear()
	run := startRun(t, b, old, `{}`)
	// A reload changed the pipeline: the running tree finishes on its hash.
	current := graph("linear", "a", uses("a", "other", ""))
	current.Hash = "blake3:new"
	p := &commands.Pipelines{Set: &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{"linear": current}}, Config: config.Default()}
	runOne(t, b, run.JobID, ok(`"a"`), p)
	jb := b.fold(t, enqueuedAt(t, b, run.RunID, "b"))
	require.Equal(t, "pb", jb.Plugin)
	require.Equal(t, old.Hash, jb.Pipeline.Hash)
}

func TestPipelineIfBypass(t *testing.T) {
	b := setup(t)
	pl := linear()
	pl.Nodes["b"].If = &pipeline.Condition{Op: "eq", Path: "payload.result", Value: raw(`"go"`)}
	run := startRun(t, b, pl, `{}`)
	runOne(t, b, run.JobID, ok(`"stop"`), nil)
	p := progress(t, b, run.RunID)
	require.Equal(t, []events.SkippedStep{{Node: "b", Reason: "if was false"}}, p.Skipped)
	c := b.fold(t, enqueuedAt(t, b, run.RunID, "c"))
	require.JSONEq(t, `{"result":"stop"}`, string(c.Payload), "a bypassed step hands its input on")
}

func TestPipelineBaggageViolation(t *testing.T) {
	b := setup(t)
	pl := linear()
	pl.Nodes["a"].Baggage = []pipeline.Claim{{Path: "web.url", From: "payload.url"}}
	pl.Nodes["b"].Baggage = []pipeline.Claim{{Path: "web.url", From: "payload.result"}}
	run := startRun(t, b, pl, `{"url":"https://a"}`)
	a := b.fold(t, run.JobID)
	require.JSONEq(t, `{"web":{"url":"https://a"}}`, string(a.Context))
	runOne(t, b, run.JobID, ok(`"https://b"`), nil)
	jb := b.fold(t, enqueuedAt(t, b, run.RunID, "b"))
	require.Equal(t, events.StatusDead, jb.Status)
	require.Contains(t, jb.LastError, "inherited baggage is immutable")
	require.Equal(t, events.RunFailed, finished(t, b, run.RunID).Status)
}

func TestPipelineProjectionsReplayEqual(t *testing.T) {
	b := setup(t)
	pr := projections.New(b.l, projections.Options{})
	pr.Start(b.ctx)
	defer pr.Stop()

	// A mixed run: a split whose branches succeed, fail and are canceled,
	// a join, and a linear run that fails.
	run := startRun(t, b, fanout(true), `{"k":1}`)
	jobs := map[string]string{}
	for _, j := range progress(t, b, run.RunID).Enqueued {
		jobs[j.Node] = j.JobID
	}
	runOne(t, b, jobs["b0"], ok(`"zero"`), nil)
	runOne(t, b, jobs["b1"], dead("boom"), nil)
	_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: jobs["b2"], Reason: "stop", Now: now})
	require.NoError(t, err)
	runOne(t, b, enqueuedAt(t, b, run.RunID, "join"), ok(`"joined"`), nil)
	other := startRun(t, b, linear(), `{}`)
	runOne(t, b, other.JobID, dead("no"), nil)
	running := startRun(t, b, linear(), `{}`)

	head, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	require.NoError(t, pr.WaitFor(b.ctx, head))
	scratch, err := ledger.Open(b.ctx, filepath.Join(t.TempDir(), "scratch.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer scratch.Close()
	mismatch, err := projections.Compare(b.ctx, b.l, scratch, nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)

	got, err := views.ReadRun(b.ctx, b.l, run.RunID)
	require.NoError(t, err)
	require.Equal(t, events.RunSucceeded, got.Status)
	require.Equal(t, run.JobID, got.JobID)
	require.Len(t, got.Results, 1)
	got, err = views.ReadRun(b.ctx, b.l, other.RunID)
	require.NoError(t, err)
	require.Equal(t, events.RunFailed, got.Status)
	require.Equal(t, "no", got.Error)
	runs, err := views.FindRuns(b.ctx, b.l, views.RunQuery{Pipeline: "linear"})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, running.RunID, runs[0].RunID)
	require.Equal(t, events.RunRunning, runs[0].Status)
	_, err = views.ReadRun(b.ctx, b.l, "nope")
	require.ErrorIs(t, err, views.ErrRunNotFound)
}
