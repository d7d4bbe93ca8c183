package main_test

// End-to-end tests of POST /pipeline/{name} and pipeline run --wait on the
// real binary: a synchronous pipeline's answer within and past its timeout,
// the api.max_concurrent_sync limit, async pipelines, scopes.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// pipelineSyncWorld is a daemon with the API on a free loopback port, a
// plugin:rw and a plugin:ro token, and pipelines over the fixture plugins:
// slow answers once $SCRATCH/release exists, breakable fails while
// $SCRATCH/broken exists. api.write_timeout is 1s, shorter than a
// synchronous caller's wait: its answer must be written all the same.
type pipelineSyncWorld struct {
	*jobWorld
	base      string // http://127.0.0.1:PORT
	rw, ro    string // bearer keys
	gate      string // slow's release file
	broken    string // breakable's failure switch
	daemonLog func() string
}

func newPipelineSyncWorld(t *testing.T) *pipelineSyncWorld {
	t.Helper()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
api:
  listen: 127.0.0.1:0
  max_concurrent_sync: 1
  write_timeout: 1s
plugins:
  slow: {config: {dir: "$SCRATCH"}}
  sink: {}
  breakable: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
pipelines:
  - name: quick
    execution_mode: synchronous
    timeout: 1m
    steps:
      - uses: sink.handle
  - name: held
    execution_mode: synchronous
    timeout: 1m
    steps:
      - id: wait
        uses: slow.poll
      - id: finish
        uses: sink.handle
  - name: impatient
    execution_mode: synchronous
    timeout: 2s
    steps:
      - uses: slow.poll
  - name: background
    steps:
      - uses: slow.poll
  - name: broken
    steps:
      - uses: breakable.poll
  - name: brokensync
    execution_mode: synchronous
    steps:
      - uses: breakable.poll
`)
	s := &pipelineSyncWorld{jobWorld: w, gate: filepath.Join(w.scratch, "release"), broken: filepath.Join(w.scratch, "broken")}
	s.rw = lastLine(w.run("config", "token", "create", "caller", "--scopes", "plugin:rw").stdout)
	s.ro = lastLine(w.run("config", "token", "create", "reader", "--scopes", "plugin:ro").stdout)
	require.Regexp(t, `^dtk_`, s.rw)
	require.Regexp(t, `^dtk_`, s.ro)
	check := w.run("config", "check")
	require.Equal(t, 0, check.code, "%s", check)

	p := start(t, nil, w.args("system", "start")...)
	s.daemonLog = func() string {
		lines, _ := p.snapshot()
		return strings.Join(lines, "\n")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", s.daemonLog())
		}
	})
	line, _ := p.waitLine(t, 0, messageIs("api: listening"))
	var listening struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &listening))
	s.base = "http://" + listening.Addr
	p.waitLine(t, 0, messageIs("ductile started"))
	return s
}

// pipelineAnswer is a POST /pipeline/{name} answer: a run or an error.
type pipelineAnswer struct {
	status     int
	retryAfter string
	raw        string
	RunID      string             `json:"run_id"`
	JobID      string             `json:"job_id"`
	Status     events.RunStatus   `json:"status"`
	Error      string             `json:"error"`
	Results    []events.RunResult `json:"results"`
	Code       string             `json:"code"`
	Message    string             `json:"message"`
	Hint       string             `json:"hint"`
}

// post calls POST /pipeline/name with key and body. It may run on another
// goroutine: it reports errors instead of failing the test.
func (s *pipelineSyncWorld) post(name, key, body string) (pipelineAnswer, error) {
	req, err := http.NewRequest(http.MethodPost, s.base+"/pipeline/"+name, strings.NewReader(body))
	if err != nil {
		return pipelineAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	client := http.Client{Timeout: procTimeout}
	resp, err := client.Do(req)
	if err != nil {
		return pipelineAnswer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return pipelineAnswer{}, err
	}
	a := pipelineAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), raw: string(raw)}
	return a, json.Unmarshal(raw, &a)
}

func (s *pipelineSyncWorld) mustPost(name, key, body string) pipelineAnswer {
	s.t.Helper()
	a, err := s.post(name, key, body)
	require.NoError(s.t, err, a.raw)
	return a
}

// waitRunning waits until a job of plugin is running, and returns it.
func (s *pipelineSyncWorld) waitRunning(plugin string) jobView {
	s.t.Helper()
	var running jobView
	waitFor(s.t, waitTimeout, "a running "+plugin+" job", func() bool {
		var jobs []jobView
		s.runJSON(0, &jobs, "job", "list", "--json")
		for _, j := range jobs {
			if j.Plugin == plugin && j.Status == "running" {
				running = j
				return true
			}
		}
		return false
	}, func() string { return s.run("job", "list").stdout })
	return running
}

// TestPipelineSyncAPIE2E: a synchronous pipeline answers 200 with its
// results within its timeout (424 if it failed) and 202 with its run past it (the run then
// finishes on its own); one caller beyond api.max_concurrent_sync gets 503
// too_many_sync with Retry-After, and nothing starts; an async pipeline
// answers 202 at once; a plugin:ro token gets 403.
func TestPipelineSyncAPIE2E(t *testing.T) {
	t.Parallel()
	s := newPipelineSyncWorld(t)

	// Within its timeout: 200 with the run's status and results.
	a := s.mustPost("quick", s.rw, `{"n": 1}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, events.RunSucceeded, a.Status, a.raw)
	require.NotEmpty(t, a.RunID)
	require.NotEmpty(t, a.JobID)
	require.Len(t, a.Results, 1, a.raw)
	require.Equal(t, "sink", a.Results[0].Plugin)
	require.Equal(t, a.JobID, a.Results[0].JobID, "the one step is the first job and the result")
	require.JSONEq(t, `"sunk"`, string(a.Results[0].Result))

	// No body is the payload {}.
	a = s.mustPost("quick", s.rw, "")
	require.Equal(t, http.StatusOK, a.status, a.raw)

	// A failed run is a 424 run_failed (curl -f fails), with the same body.
	require.NoError(t, os.WriteFile(s.broken, nil, 0o644))
	a = s.mustPost("brokensync", s.rw, `{}`)
	require.Equal(t, http.StatusFailedDependency, a.status, a.raw)
	require.Contains(t, a.raw, `"code":"run_failed"`)
	require.Equal(t, events.RunFailed, a.Status, a.raw)
	require.Contains(t, a.Error, "upstream is down", a.raw)
	require.Len(t, a.Results, 1, a.raw)
	require.Equal(t, events.StatusDead, a.Results[0].Status, a.raw)
	require.NoError(t, os.Remove(s.broken))

	// An unknown pipeline: 404 naming the known ones.
	a = s.mustPost("nosuch", s.rw, `{}`)
	require.Equal(t, http.StatusNotFound, a.status, a.raw)
	require.Contains(t, a.Hint, "quick", a.raw)

	// A plugin:ro token may not start a run: 403, and nothing starts.
	before := len(s.jobs())
	a = s.mustPost("quick", s.ro, `{}`)
	require.Equal(t, http.StatusForbidden, a.status, a.raw)
	require.Equal(t, "forbidden", a.Code, a.raw)
	require.Len(t, s.jobs(), before, "a refused call starts nothing")

	// One caller waits on a held run (slow waits for the gate); a second
	// synchronous caller, once the first run's first job is running, is
	// refused: 503 too_many_sync with Retry-After, nothing started.
	type answer struct {
		a   pipelineAnswer
		err error
	}
	first := make(chan answer, 1)
	go func() {
		a, err := s.post("held", s.rw, `{"who": "first"}`)
		first <- answer{a, err}
	}()
	running := s.waitRunning("slow")
	before = len(s.jobs())
	second := s.mustPost("quick", s.rw, `{"who": "second"}`)
	require.Equal(t, http.StatusServiceUnavailable, second.status, second.raw)
	require.Equal(t, "too_many_sync", second.Code, second.raw)
	require.Equal(t, "1", second.retryAfter)
	require.Contains(t, second.Message, "api.max_concurrent_sync")
	require.Len(t, s.jobs(), before, "a refused call starts nothing")

	// An async pipeline is not counted and answers 202 at once, while the
	// synchronous caller still waits.
	async := s.mustPost("background", s.rw, `{}`)
	require.Equal(t, http.StatusAccepted, async.status, async.raw)
	require.Equal(t, events.RunRunning, async.Status)
	require.NotEmpty(t, async.RunID)
	require.NotEmpty(t, async.JobID)
	select {
	case got := <-first:
		t.Fatalf("the held call answered before its run could finish: %+v %v", got.a, got.err)
	default:
	}

	require.NoError(t, os.WriteFile(s.gate, nil, 0o644))
	var got answer
	select {
	case got = <-first:
	case <-time.After(waitTimeout):
		t.Fatal("the held call did not answer once its run could finish")
	}
	require.NoError(t, got.err, got.a.raw)
	require.Equal(t, http.StatusOK, got.a.status, got.a.raw)
	require.Equal(t, events.RunSucceeded, got.a.Status, got.a.raw)
	require.Equal(t, running.ID, got.a.JobID, "the running slow job was the held run's first")
	require.Len(t, got.a.Results, 1, got.a.raw)
	require.Equal(t, "finish", got.a.Results[0].Node)
	require.Equal(t, "sink", got.a.Results[0].Plugin)
	finished := waitRun(t, s, async.RunID)
	require.Equal(t, events.RunSucceeded, finished.Status)

	// The place is free again: a synchronous call is served.
	a = s.mustPost("quick", s.rw, `{}`)
	require.Equal(t, http.StatusOK, a.status, a.raw)

	// Past its timeout (2s, past api.write_timeout; slow waits for the gate
	// again): 202 with the run and its first job; the run then finishes on
	// its own.
	require.NoError(t, os.Remove(s.gate))
	a = s.mustPost("impatient", s.rw, `{}`)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, events.RunRunning, a.Status, a.raw)
	require.NotEmpty(t, a.RunID)
	require.NotEmpty(t, a.JobID)
	require.Empty(t, a.Results)
	require.Equal(t, a.JobID, s.waitRunning("slow").ID, "the run goes on past the answer")
	require.NoError(t, os.WriteFile(s.gate, nil, 0o644))
	finished = waitRun(t, s, a.RunID)
	require.Equal(t, events.RunSucceeded, finished.Status)
	require.Len(t, finished.Results, 1)
	require.Equal(t, a.JobID, finished.Results[0].JobID)
}

// jobs is every job, as job list --json prints them.
func (s *pipelineSyncWorld) jobs() []jobView {
	s.t.Helper()
	var jobs []jobView
	s.runJSON(0, &jobs, "job", "list", "--json")
	return jobs
}

// waitRun waits on the ledger (views.WaitRun, from this process) until run
// runID has finished.
func waitRun(t *testing.T, s *pipelineSyncWorld, runID string) events.RunFinishedData {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	finished, err := views.WaitRun(ctx, openLedger(t, s.state), runID)
	require.NoError(t, err, "run %s did not finish", runID)
	return finished
}

// TestPipelineSyncRunWaitJSONE2E: pipeline run NAME --wait --json prints
// the finished run with its results, and exits 1 for a failed run; without
// --json a result that is a string is printed as text, as plugin run --wait
// prints it.
func TestPipelineSyncRunWaitJSONE2E(t *testing.T) {
	t.Parallel()
	s := newPipelineSyncWorld(t)
	var out struct {
		Pipeline string             `json:"pipeline"`
		RunID    string             `json:"run_id"`
		JobID    string             `json:"job_id"`
		Status   events.RunStatus   `json:"status"`
		Error    string             `json:"error"`
		Results  []events.RunResult `json:"results"`
	}
	s.runJSON(0, &out, "pipeline", "run", "quick", "--payload", `{"n":1}`, "--wait", "--timeout", "1m", "--json")
	require.Equal(t, "quick", out.Pipeline)
	require.Equal(t, events.RunSucceeded, out.Status)
	require.NotEmpty(t, out.RunID)
	require.Len(t, out.Results, 1)
	require.Equal(t, out.JobID, out.Results[0].JobID)
	require.JSONEq(t, `"sunk"`, string(out.Results[0].Result))

	r := s.run("pipeline", "run", "quick", "--wait", "--timeout", "1m")
	require.Equal(t, 0, r.code, "%s", r)
	require.Regexp(t, `(?m)^  step1: sink handle, job \S+ succeeded: sunk$`, r.stdout)

	require.NoError(t, os.WriteFile(s.broken, nil, 0o644))
	out.Results = nil
	r = s.runJSON(1, &out, "pipeline", "run", "broken", "--wait", "--timeout", "1m", "--json")
	require.Equal(t, "broken", out.Pipeline)
	require.Equal(t, events.RunFailed, out.Status, r.stdout)
	require.NotEmpty(t, out.Error, r.stdout)
	require.Len(t, out.Results, 1, r.stdout)
	require.Equal(t, events.StatusDead, out.Results[0].Status, r.stdout)
	require.Empty(t, r.stderr, "the JSON says it failed; nothing more on stderr")
}
