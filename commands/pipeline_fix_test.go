package commands_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
)

// nested is a JSON value nesting depth levels of arrays.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func TestPipelineSuccessorThatCannotBeEnqueued(t *testing.T) {
	t.Run("a join payload too deep fails the run, not the completion", func(t *testing.T) {
		b := setup(t)
		run := startRun(t, b, fanout(true), `{}`)
		jobs := map[string]string{}
		for _, j := range progress(t, b, run.RunID).Enqueued {
			jobs[j.Node] = j.JobID
		}
		runOne(t, b, jobs["b0"], ok(`"zero"`), nil)
		runOne(t, b, jobs["b1"], dead("boom"), nil)
		// Within a job payload's limit alone; over it inside the join's.
		res := runOne(t, b, jobs["b2"], ok(nested(499)), nil)
		require.Equal(t, events.StatusSucceeded, res.Status)
		fin := finished(t, b, run.RunID)
		require.NotNil(t, fin)
		require.Equal(t, events.RunFailed, fin.Status)
		require.Contains(t, fin.Error, "payload nests")
	})
	t.Run("a step whose baggage makes a context too deep is recorded dead", func(t *testing.T) {
		b := setup(t)
		pl := linear()
		pl.Nodes["b"].Baggage = []pipeline.Claim{{Path: "x.y.z", From: "payload.result"}}
		run := startRun(t, b, pl, `{}`)
		res := runOne(t, b, run.JobID, ok(nested(498)), nil)
		require.Equal(t, events.StatusSucceeded, res.Status)
		jb := b.fold(t, enqueuedAt(t, b, run.RunID, "b"))
		require.Equal(t, events.StatusDead, jb.Status)
		require.Contains(t, jb.LastError, "context nests")
		require.Equal(t, events.RunFailed, finished(t, b, run.RunID).Status)
	})
	t.Run("an on trigger whose first step cannot be enqueued", func(t *testing.T) {
		b := setup(t)
		pl := graph("watch", "a", uses("a", "pa", ""))
		pl.On = "file.found"
		set := &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{"watch": pl}}
		cfg := config.Default()
		res, err := commands.EnqueueJob(b.ctx, b.l, commands.JobFor(cfg, "scanner", "poll", events.ActorCLI))
		require.NoError(t, err)
		done := runOne(t, b, res.JobID, commands.Outcome{Kind: events.OutcomeOK,
			Response: raw(`{"status":"ok","events":[{"type":"file.found","payload":{"deep":` + nested(501) + `}}]}`)},
			&commands.Pipelines{Set: set, Config: cfg})
		require.Equal(t, events.StatusSucceeded, done.Status)
	})
	t.Run("recovery of a branch whose join cannot be enqueued", func(t *testing.T) {
		b := setup(t)
		run := startRun(t, b, fanout(true), `{}`)
		jobs := map[string]string{}
		for _, j := range progress(t, b, run.RunID).Enqueued {
			jobs[j.Node] = j.JobID
		}
		runOne(t, b, jobs["b0"], ok(nested(499)), nil)
		runOne(t, b, jobs["b1"], ok(`1`), nil)
		for attempt := 1; ; attempt++ {
			_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: jobs["b2"], Timeout: time.Minute, PID: 1, Now: now})
			require.NoError(t, err)
			rec, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: jobs["b2"], Now: now})
			require.NoError(t, err)
			if rec.Status == events.StatusDead {
				break
			}
			require.Less(t, attempt, 10)
		}
		require.Equal(t, events.RunFailed, finished(t, b, run.RunID).Status)
	})
}

func TestPipelineRunStateCarriesNoResults(t *testing.T) {
	b := setup(t)
	pl := graph("wide", "a", uses("a", "pa", "split"),
		&pipeline.Node{ID: "split", Kind: pipeline.KindSplit, Branches: []string{"b0", "b1"}, Next: "join", ContinueOnError: true},
		uses("b0", "p0", ""), uses("b1", "p1", ""), uses("join", "pj", ""))
	run := startRun(t, b, pl, `{}`)
	const n = 5
	var emitted []string
	for i := range n {
		emitted = append(emitted, fmt.Sprintf(`{"type":"x","payload":{"i":%d}}`, i))
	}
	runOne(t, b, run.JobID, commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","events":[` + strings.Join(emitted, ",") + `]}`)}, nil)
	big := `"` + strings.Repeat("r", 10_000) + `"`
	var branches []events.RunJob
	branches = append(branches, progress(t, b, run.RunID).Enqueued...)
	require.Len(t, branches, 2*n)
	var joins []string
	for i, j := range branches {
		mark := b.mark(t)
		out := ok(big)
		if i == 1 {
			out = dead("boom")
		}
		runOne(t, b, j.JobID, out, nil)
		for _, ev := range b.since(t, mark) {
			if ev.Type == events.PipelineStepEnded {
				require.Less(t, len(ev.Data), 3_000, "step_ended %d carries results: %d bytes", i, len(ev.Data))
			}
		}
		for _, e := range progress(t, b, run.RunID).Enqueued {
			joins = append(joins, e.JobID)
		}
	}
	require.Len(t, joins, n, "one join per split instance")
	join := b.fold(t, joins[0])
	var in struct {
		Branches []struct {
			Node   string            `json:"node"`
			Status events.Status     `json:"status"`
			Result json.RawMessage   `json:"result"`
			Events []json.RawMessage `json:"events"`
		} `json:"branches"`
	}
	require.NoError(t, json.Unmarshal(join.Payload, &in))
	require.Len(t, in.Branches, 2)
	require.Equal(t, events.StatusDead, in.Branches[1].Status)
	require.JSONEq(t, big, string(in.Branches[0].Result))
	require.JSONEq(t, `null`, string(in.Branches[1].Result))
	for i, id := range joins {
		mark := b.mark(t)
		runOne(t, b, id, ok(fmt.Sprintf(`{"join":%d,"big":%s}`, i, big)), nil)
		for _, ev := range b.since(t, mark) {
			if ev.Type == events.PipelineStepEnded {
				require.Less(t, len(ev.Data), 3_000, "join step_ended %d carries results", i)
			}
		}
	}
	fin := finished(t, b, run.RunID)
	require.Equal(t, events.RunSucceeded, fin.Status)
	require.Len(t, fin.Results, n)
	for i, r := range fin.Results {
		require.Equal(t, joins[i], r.JobID)
		require.Equal(t, "pj", r.Plugin)
		require.Equal(t, "handle", r.Command)
		require.JSONEq(t, fmt.Sprintf(`{"join":%d,"big":%s}`, i, big), string(r.Result))
	}
}

func TestPipelineJoinMergesNumbersByValue(t *testing.T) {
	b := setup(t)
	pl := fanout(false)
	pl.Nodes["b0"].Baggage = []pipeline.Claim{{Path: "x.n", From: "payload.a"}, {Path: "x.k", From: "payload.k"}}
	pl.Nodes["b1"].Baggage = []pipeline.Claim{{Path: "x.n", From: "payload.b"}, {Path: "x.m", From: "payload.k"}}
	run := startRun(t, b, pl, `{"a":1,"b":1.0,"k":"v"}`)
	for _, j := range progress(t, b, run.RunID).Enqueued {
		runOne(t, b, j.JobID, ok(`"`+j.Node+`"`), nil)
	}
	join := b.fold(t, enqueuedAt(t, b, run.RunID, "join"))
	require.Equal(t, events.StatusQueued, join.Status, "1 and 1.0 are the same value: %s", join.LastError)
	require.JSONEq(t, `{"x":{"n":1,"k":"v","m":"v"}}`, string(join.Context))
}

func TestPipelineJoinConflictFailsABypassedJoin(t *testing.T) {
	b := setup(t)
	pl := fanout(false)
	pl.Nodes["b0"].Baggage = []pipeline.Claim{{Path: "x.n", From: "payload.a"}}
	pl.Nodes["b1"].Baggage = []pipeline.Claim{{Path: "x.n", From: "payload.b"}}
	pl.Nodes["join"].If = &pipeline.Condition{Op: "exists", Path: "payload.nothing"}
	run := startRun(t, b, pl, `{"a":1,"b":2}`)
	for _, j := range progress(t, b, run.RunID).Enqueued {
		runOne(t, b, j.JobID, ok(`"`+j.Node+`"`), nil)
	}
	p := progress(t, b, run.RunID)
	require.Empty(t, p.Enqueued)
	require.Equal(t, []events.SkippedStep{{Node: "join", Reason: "if was false"}}, p.Skipped)
	fin := finished(t, b, run.RunID)
	require.Equal(t, events.RunFailed, fin.Status)
	require.Contains(t, fin.Error, "context.x.n")
}

func TestPipelineStepDeadAtOnceFiresHooks(t *testing.T) {
	b := setup(t)
	pl := linear()
	pl.Nodes["a"].Baggage = []pipeline.Claim{{Path: "web.url", From: "payload.url"}}
	pl.Nodes["b"].Baggage = []pipeline.Claim{{Path: "web.url", From: "payload.result"}}
	audit := graph("audit", "x", uses("x", "auditor", ""))
	audit.OnHook = pipeline.HookFailed
	cfg := config.Default()
	pc := config.DefaultPlugin()
	pc.NotifyOnComplete = true
	cfg.Plugins["pb"] = pc
	p := &commands.Pipelines{Set: &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{"linear": pl, "audit": audit}}, Config: cfg}
	run := startRun(t, b, pl, `{"url":"https://a"}`)
	mark := b.mark(t)
	runOne(t, b, run.JobID, ok(`"https://b"`), p)
	jb := b.fold(t, enqueuedAt(t, b, run.RunID, "b"))
	require.Equal(t, events.StatusDead, jb.Status)
	var started *events.RunStarted
	for _, ev := range b.since(t, mark) {
		if ev.Type == events.PipelineRunStarted {
			started = &events.RunStarted{}
			require.NoError(t, json.Unmarshal(ev.Data, started))
		}
	}
	require.NotNil(t, started, "the dead step's job.failed hook fires")
	require.Equal(t, "audit", started.Pipeline)
	first := b.fold(t, started.JobID)
	var in struct {
		JobID  string `json:"job_id"`
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(first.Payload, &in))
	require.Equal(t, jb.JobID, in.JobID)
	require.Equal(t, "dead", in.Status)
	require.Contains(t, in.Error, "inherited baggage is immutable")
}

func TestPipelineMaxDepthCountsFromTheRunsStart(t *testing.T) {
	b := setup(t)
	pl := linear()
	pl.On = "file.found"
	pl.MaxDepth = 1
	cfg := config.Default()
	p := &commands.Pipelines{Set: &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{"linear": pl}}, Config: cfg}
	enq := commands.JobFor(cfg, "scanner", "poll", events.ActorCLI)
	enq.Depth = 3
	res, err := commands.EnqueueJob(b.ctx, b.l, enq)
	require.NoError(t, err)
	mark := b.mark(t)
	runOne(t, b, res.JobID, commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","events":[{"type":"file.found","payload":{}}]}`)}, p)
	var started events.RunStarted
	for _, ev := range b.since(t, mark) {
		if ev.Type == events.PipelineRunStarted {
			require.NoError(t, json.Unmarshal(ev.Data, &started))
		}
	}
	require.NotEmpty(t, started.JobID, "the run's first step is at its depth 0")
	require.Equal(t, 4, started.State.BaseDepth)
	runOne(t, b, started.JobID, ok(`"a"`), p)
	jb := enqueuedAt(t, b, started.RunID, "b")
	runOne(t, b, jb, ok(`"b"`), p)
	pr := progress(t, b, started.RunID)
	require.Empty(t, pr.Enqueued)
	require.Equal(t, []events.DroppedStep{{Node: "c", Depth: 2, Limit: 1,
		Reason: "depth 2 would pass the pipeline's max_depth (1): the step is not run"}}, pr.Dropped)
}

// Compiled forms read back from a ledger are cached by the Pipelines value
// that read them, not by the process: another ledger (or a nil Pipelines)
// reads its own.
func TestPipelineCompiledCacheIsThePipelines(t *testing.T) {
	var jobs []string
	for _, plugin := range []string{"pb", "other"} {
		b := setup(t)
		pl := linear()
		pl.Hash = "blake3:the-same"
		pl.Nodes["b"].Plugin = plugin
		run := startRun(t, b, pl, `{}`)
		runOne(t, b, run.JobID, ok(`"a"`), nil)
		jobs = append(jobs, b.fold(t, enqueuedAt(t, b, run.RunID, "b")).Plugin)
	}
	require.Equal(t, []string{"pb", "other"}, jobs)
}

// TestPipelineSplitClaimKeepsInheritedBaggage: a split's own baggage claims
// add to the context its branches inherit; they do not replace it.
func TestPipelineSplitClaimKeepsInheritedBaggage(t *testing.T) {
	b := setup(t)
	pl := graph("claims", "a", uses("a", "pa", "split"),
		&pipeline.Node{ID: "split", Kind: pipeline.KindSplit, Branches: []string{"b0", "b1"},
			Baggage: []pipeline.Claim{{Path: "step.result", From: "payload.result"}}},
		uses("b0", "p0", ""), uses("b1", "p1", ""))
	pl.Nodes["a"].Baggage = []pipeline.Claim{{Path: "web.url", From: "payload.url"}}
	run := startRun(t, b, pl, `{"url":"https://a"}`)
	first := b.fold(t, run.JobID)
	require.Equal(t, events.ActorAPI, first.SubmittedBy, "the run's first job is its submitter's")
	require.Equal(t, first.JobID, first.SourceEventID, "the core assigns the input event's id")
	runOne(t, b, run.JobID, ok(`"fetched"`), nil)
	for _, node := range []string{"b0", "b1"} {
		branch := b.fold(t, enqueuedAt(t, b, run.RunID, node))
		require.Equal(t, events.ActorPipeline, branch.SubmittedBy)
		require.JSONEq(t, `{"web":{"url":"https://a"},"step":{"result":"fetched"}}`, string(branch.Context), node)
	}
}
