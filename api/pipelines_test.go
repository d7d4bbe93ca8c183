package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
)

// runs stands in for the pipeline runtime: its start records
// pipeline.run_started for a new run and hands the run to the test, which
// ends it (or not) by appending pipeline.run_finished itself.
type runs struct {
	started chan startedRun
	calls   atomic.Int64
	fail    error // when set, start fails with it
}

type startedRun struct {
	commands.RunStartedResult
	cmd commands.StartRun
}

func newRuns() *runs { return &runs{started: make(chan startedRun, 16)} }

func (r *runs) start(ctx context.Context, l *ledger.Ledger, cmd commands.StartRun) (commands.RunStartedResult, error) {
	r.calls.Add(1)
	if r.fail != nil {
		return commands.RunStartedResult{}, r.fail
	}
	id, jobID := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	seqs, err := l.Append(ctx, ledger.NewEvent{Stream: events.RunStream(id), Type: events.PipelineRunStarted,
		Data: events.RunStartedData{RunID: id, Pipeline: cmd.Pipeline.Name, Hash: cmd.Pipeline.Hash, Mode: cmd.Pipeline.ExecutionMode,
			Trigger: cmd.Trigger, JobID: jobID, SubmittedBy: cmd.SubmittedBy}})
	if err != nil {
		return commands.RunStartedResult{}, err
	}
	res := commands.RunStartedResult{RunID: id, JobID: jobID, Seq: seqs[0]}
	r.started <- startedRun{res, cmd}
	return res, nil
}

// next is the next run started, within a deadline.
func (r *runs) next(t *testing.T) startedRun {
	t.Helper()
	select {
	case s := <-r.started:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no run was started")
		return startedRun{}
	}
}

// finish records the end of run: the runtime's pipeline.run_finished.
func finish(t *testing.T, l *ledger.Ledger, run startedRun, status events.RunStatus) {
	t.Helper()
	d := events.RunFinishedData{RunID: run.RunID, Status: status, Results: []events.RunResult{{
		JobID: run.JobID, Node: "fetch", Plugin: "echo", Command: "handle", Status: events.StatusSucceeded, Result: json.RawMessage(`{"got":"it"}`)}}}
	if status == events.RunFailed {
		d.Error = "step fetch: job " + run.JobID + " is dead"
		d.Results[0].Status, d.Results[0].Result, d.Results[0].Error = events.StatusDead, nil, "boom"
	}
	_, err := l.Append(context.Background(), ledger.NewEvent{Stream: events.RunStream(run.RunID), ExpectedVersion: 1,
		Type: events.PipelineRunFinished, Data: d})
	require.NoError(t, err)
}

func testPipeline(name, mode string, timeout time.Duration) *pipeline.Pipeline {
	return &pipeline.Pipeline{Name: name, ExecutionMode: mode, Timeout: timeout, MaxDepth: pipeline.DefaultMaxDepth,
		Entry: "fetch", Nodes: map[string]*pipeline.Node{"fetch": {ID: "fetch", Kind: pipeline.KindUses, Plugin: "echo", Command: "handle"}},
		Hash: "blake3:" + name}
}

// startPipelines serves an API with three pipelines (sync waits a minute,
// quick 20 ms, async does not wait) on r, with settings changed by
// mutate.
func startPipelines(t *testing.T, r *runs, mutate func(*config.APIServer)) *fixture {
	t.Helper()
	set := &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{
		"sync":  testPipeline("sync", pipeline.ModeSynchronous, time.Minute),
		"quick": testPipeline("quick", pipeline.ModeSynchronous, 20*time.Millisecond),
		"async": testPipeline("async", pipeline.ModeAsync, 0),
	}}
	return start(t, func(o *api.Options) {
		eng := engine.New(engine.Options{Ledger: o.Ledger, Config: config.Default(), Applied: applied, Pipelines: set, StartRun: r.start})
		o.Engine = func() *engine.Engine { return eng }
		o.Settings.MaxConcurrentSync, o.Settings.MaxSyncTimeout = 2, time.Minute
		if mutate != nil {
			mutate(&o.Settings)
		}
	})
}

// call POSTs to /pipeline/name in a goroutine; its answer comes on the
// channel.
func (f *fixture) call(name, body string) chan response {
	out := make(chan response, 1)
	go func() { out <- f.do("POST", "/pipeline/"+name, "plugin-rw", []byte(body)) }()
	return out
}

func answer(t *testing.T, c chan response) response {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return response{}
	}
}

// TestRunPipelineAsync: an async pipeline answers 202 with the run and its
// first job once the run is started, with the body as the payload (none:
// {}), started by the API.
func TestRunPipelineAsync(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil)
	res := f.do("POST", "/pipeline/async", "plugin-rw", []byte(`{"url":"https://example.com/a"}`))
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	run := r.next(t)
	require.Equal(t, map[string]any{"run_id": run.RunID, "job_id": run.JobID, "status": "running"}, res.body)
	require.Equal(t, "async", run.cmd.Pipeline.Name)
	require.Equal(t, events.TriggerAPI, run.cmd.Trigger)
	require.Equal(t, events.ActorAPI, run.cmd.SubmittedBy)
	require.JSONEq(t, `{"url":"https://example.com/a"}`, string(run.cmd.Payload))
	require.NotNil(t, run.cmd.Config)

	res = f.do("POST", "/pipeline/async", "admin", nil)
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	require.JSONEq(t, `{}`, string(r.next(t).cmd.Payload))
}

// TestRunPipelineSyncFinishes: a synchronous pipeline whose run finishes
// within its timeout answers with the run's status and results: 200 when it
// succeeded, 424 run_failed when it failed (so that curl -f fails).
func TestRunPipelineSyncFinishes(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil)
	for _, status := range []events.RunStatus{events.RunSucceeded, events.RunFailed} {
		got := f.call("sync", `{"n":1}`)
		run := r.next(t)
		finish(t, f.l, run, status)
		res := answer(t, got)
		if status == events.RunSucceeded {
			require.Equal(t, http.StatusOK, res.status, string(res.raw))
			require.NotContains(t, res.body, "code")
		} else {
			requireError(t, res, http.StatusFailedDependency, "run_failed")
			require.Contains(t, res.body["message"], "pipeline sync: run "+run.RunID+" failed: step fetch: job "+run.JobID+" is dead")
			require.Contains(t, res.body["hint"], "GET /job/"+run.JobID+"/tree")
		}
		require.Equal(t, run.RunID, res.body["run_id"])
		require.Equal(t, run.JobID, res.body["job_id"])
		require.Equal(t, string(status), res.body["status"])
		results := res.body["results"].([]any)
		require.Len(t, results, 1)
		result := results[0].(map[string]any)
		require.Equal(t, run.JobID, result["job_id"])
		require.Equal(t, "fetch", result["node"])
		if status == events.RunSucceeded {
			require.Equal(t, map[string]any{"got": "it"}, result["result"])
			require.NotContains(t, res.body, "error")
		} else {
			require.Equal(t, "dead", result["status"])
			require.Contains(t, res.body["error"], "is dead")
		}
	}
}

// TestRunPipelineSyncPastItsWait: past the pipeline's timeout, or past
// api.max_sync_timeout when that is shorter, the answer is 202 running
// (the run goes on).
func TestRunPipelineSyncPastItsWait(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil)
	res := f.do("POST", "/pipeline/quick", "plugin-rw", nil)
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	run := r.next(t)
	require.Equal(t, map[string]any{"run_id": run.RunID, "job_id": run.JobID, "status": "running"}, res.body)

	capped := startPipelines(t, r, func(s *config.APIServer) { s.MaxSyncTimeout = 20 * time.Millisecond })
	res = capped.do("POST", "/pipeline/sync", "plugin-rw", nil) // its own timeout is a minute
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	require.Equal(t, "running", res.body["status"])
	require.Equal(t, r.next(t).RunID, res.body["run_id"])

	// The wait may outlast api.write_timeout: the answer is still written.
	short := startPipelines(t, r, func(s *config.APIServer) { s.WriteTimeout = time.Millisecond })
	res = short.do("POST", "/pipeline/quick", "plugin-rw", nil) // waits 20ms
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	require.Equal(t, r.next(t).RunID, res.body["run_id"])
}

// TestRunPipelineSyncLimit: with api.max_concurrent_sync callers waiting,
// one more is answered 503 too_many_sync with Retry-After and nothing is
// started; async pipelines are not limited; a caller that got its answer
// frees its place.
func TestRunPipelineSyncLimit(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil)
	first, second := f.call("sync", ""), f.call("sync", "")
	waiting := []startedRun{r.next(t), r.next(t)}

	res := f.do("POST", "/pipeline/quick", "plugin-rw", nil)
	requireError(t, res, http.StatusServiceUnavailable, "too_many_sync")
	require.Equal(t, "1", res.header.Get("Retry-After"))
	require.Contains(t, res.body["message"], "2 synchronous pipeline calls are waiting already (api.max_concurrent_sync)")
	require.Contains(t, res.body["hint"], "call again after Retry-After seconds (nothing was started)")
	require.Equal(t, int64(2), r.calls.Load(), "a refused call starts nothing")

	res = f.do("POST", "/pipeline/async", "plugin-rw", nil)
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	r.next(t)

	for _, run := range waiting {
		finish(t, f.l, run, events.RunSucceeded)
	}
	for _, got := range []chan response{first, second} {
		require.Equal(t, http.StatusOK, answer(t, got).status)
	}
	third := f.call("sync", "")
	finish(t, f.l, r.next(t), events.RunSucceeded)
	require.Equal(t, http.StatusOK, answer(t, third).status)
}

// TestRunPipelineDisconnectFreesItsPlace: a synchronous caller that goes
// away stops waiting and frees its place (the run goes on).
func TestRunPipelineDisconnectFreesItsPlace(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, func(s *config.APIServer) { s.MaxConcurrentSync = 1 })
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	gone := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, "POST", f.base+"/pipeline/sync", nil)
		if err != nil {
			gone <- err
			return
		}
		req.Header.Set("Authorization", "Bearer plugin-rw")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		gone <- err
	}()
	r.next(t)
	requireError(t, f.do("POST", "/pipeline/sync", "plugin-rw", nil), http.StatusServiceUnavailable, "too_many_sync")
	hangUp()
	require.ErrorIs(t, <-gone, context.Canceled)

	// The server frees the place once it sees the connection closed: call
	// until it answers other than 503 (each call that gets the place
	// waits for its run, which the test then finishes).
	got := make(chan response, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			res := f.do("POST", "/pipeline/sync", "plugin-rw", nil)
			if res.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				got <- res
				return
			}
			time.Sleep(5 * time.Millisecond) // a pause between calls, not an assertion
		}
	}()
	finish(t, f.l, r.next(t), events.RunSucceeded)
	require.Equal(t, http.StatusOK, answer(t, got).status)
}

// TestRunPipelineShutdownAnswersWaiting: Shutdown answers a waiting
// synchronous caller 202 at once (the run goes on), rather than holding
// the daemon's stop for the wait.
func TestRunPipelineShutdownAnswersWaiting(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil)
	got := f.call("sync", "")
	run := r.next(t)
	require.NoError(t, f.server.Shutdown(context.Background()))
	res := answer(t, got)
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	require.Equal(t, run.RunID, res.body["run_id"])
	require.Equal(t, "running", res.body["status"])
}

// TestRunPipelineRefusals: unknown pipelines, bodies that are not a JSON
// object, Idempotency-Key, too large a body and tokens without plugin:rw
// are refused, and start nothing.
func TestRunPipelineRefusals(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil)
	res := f.do("POST", "/pipeline/nosuch", "plugin-rw", nil)
	requireError(t, res, http.StatusNotFound, "not_found")
	require.Contains(t, res.body["message"], `no pipeline "nosuch"`)
	require.Contains(t, res.body["hint"], "its pipelines: async, quick, sync")

	for _, body := range []string{`[1]`, `"x"`, `null`, `{"a":`, `3`} {
		res := f.do("POST", "/pipeline/async", "plugin-rw", []byte(body))
		requireError(t, res, http.StatusBadRequest, "invalid_input")
		require.Contains(t, res.body["message"], "JSON", body) // must be a JSON object, or is not valid JSON
	}
	deep := `{"a":` + strings.Repeat("[", commands.MaxPayloadDepth) + strings.Repeat("]", commands.MaxPayloadDepth) + `}`
	res = f.do("POST", "/pipeline/sync", "plugin-rw", []byte(deep)) // not a run that fails at once
	requireError(t, res, http.StatusBadRequest, "invalid_input")
	require.Contains(t, res.body["message"], "nests 501 levels")
	res = f.do("POST", "/pipeline/async", "plugin-rw", []byte(`{}`), "Idempotency-Key", "k1")
	requireError(t, res, http.StatusBadRequest, "invalid_input")
	require.Contains(t, res.body["message"], "Idempotency-Key is not supported for pipelines yet")
	big := `{"x":"` + strings.Repeat("a", 2000) + `"}`
	requireError(t, f.do("POST", "/pipeline/sync", "plugin-rw", []byte(big)), http.StatusRequestEntityTooLarge, "too_large")
	requireError(t, f.do("POST", "/pipeline/async", "plugin-ro", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("POST", "/pipeline/async", "jobs-rw", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("POST", "/pipeline/async", "", nil), http.StatusUnauthorized, "unauthorized")
	require.Zero(t, r.calls.Load())
}

// TestRunPipelineStartFails: a run that cannot be started is a 500, and a
// synchronous caller's place is freed all the same.
func TestRunPipelineStartFails(t *testing.T) {
	r := newRuns()
	r.fail = errors.New("the ledger is gone")
	f := startPipelines(t, r, func(s *config.APIServer) { s.MaxConcurrentSync = 1 })
	for range 2 {
		requireError(t, f.do("POST", "/pipeline/sync", "plugin-rw", nil), http.StatusInternalServerError, "error")
	}
	require.Equal(t, int64(2), r.calls.Load())
}

// TestRunPipelineCompiled runs compiled pipelines through the real
// StartPipeline: the run's first job is what the API answers, recorded on
// the run's stream.
func TestRunPipelineCompiled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`pipelines:
  - name: fetch
    steps:
      - uses: echo.handle
  - name: fetch-sync
    execution_mode: synchronous
    timeout: 50ms
    steps:
      - uses: echo
`), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	set, err := pipeline.Compile(cfg, nil)
	require.NoError(t, err)
	require.NotEmpty(t, set.Pipelines)
	f := start(t, func(o *api.Options) {
		eng := engine.New(engine.Options{Ledger: o.Ledger, Config: cfg, Applied: applied, Pipelines: set})
		o.Engine = func() *engine.Engine { return eng }
	})
	for _, name := range []string{"fetch", "fetch-sync"} {
		res := f.do("POST", "/pipeline/"+name, "plugin-rw", []byte(`{"url":"https://example.com"}`))
		// Nothing runs the job here: the synchronous one answers 202 past its 50ms.
		require.Equal(t, http.StatusAccepted, res.status, "%s: %s", name, res.raw)
		require.Equal(t, "running", res.body["status"])
		evs, err := f.l.ReadStream(context.Background(), events.RunStream(res.body["run_id"].(string)))
		require.NoError(t, err)
		require.NotEmpty(t, evs, name)
		require.Equal(t, events.PipelineRunStarted, evs[0].Type)
		var started events.RunStartedData
		require.NoError(t, json.Unmarshal(evs[0].Data, &started))
		require.Equal(t, res.body["job_id"], started.JobID)
		require.Equal(t, name, started.Pipeline)
		require.Equal(t, events.TriggerAPI, started.Trigger)
		require.True(t, bytes.Contains(evs[0].Data, []byte(set.Pipelines[name].Hash)))
	}
}
