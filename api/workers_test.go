package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/metrics"
	"github.com/ductile/ductile/views"
)

// startWorkers serves an API whose plugin render runs on remote workers
// only (not installed here) and routes its render.more events to itself;
// claims wait on the fixture's projector. tune, if given, changes the
// options last.
func startWorkers(t *testing.T, tune ...func(*api.Options)) *fixture {
	t.Helper()
	return start(t, func(o *api.Options) {
		defer func() {
			for _, f := range tune {
				f(o)
			}
		}()
		o.Settings.MaxBodySize = 64 * 1024
		cfg := config.Default()
		pc := config.DefaultPlugin()
		pc.RunsOn = config.RunsRemote
		cfg.Plugins["render"] = pc
		cfg.Routes = append(cfg.Routes, config.Route{From: "render", EventType: "render.more", To: "render", Command: "handle"})
		fleet := engine.NewFleet(engine.FleetOptions{})
		fleet.Watch(o.Projector)
		eng := engine.New(engine.Options{Ledger: o.Ledger, Config: cfg, Fleet: fleet})
		o.Engine = func() *engine.Engine { return eng }
		m := metrics.New(metrics.Options{Ledger: o.Ledger, Projector: o.Projector})
		o.Metrics, o.Workers = m.Handler(), m
	})
}

// requireSeries requires /metrics to hold each series line.
func (f *fixture) requireSeries(lines ...string) {
	f.t.Helper()
	r := f.do("GET", "/metrics", "jobs-ro", nil)
	require.Equal(f.t, http.StatusOK, r.status)
	for _, line := range lines {
		require.Contains(f.t, string(r.raw), line+"\n")
	}
}

func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

var renderPlugin = events.WorkerPlugin{Name: "render", Version: "1.0.0", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}, ConcurrencySafe: true}

// registerWorker registers worker name serving render through the API.
func (f *fixture) registerWorker(name string) {
	f.t.Helper()
	r := f.do("POST", "/worker/register", "worker", jsonBody(f.t, events.WorkerRegisteredData{Name: name, Host: name + ".lan", Version: "test",
		Plugins: []events.WorkerPlugin{renderPlugin}}))
	require.Equal(f.t, http.StatusOK, r.status, string(r.raw))
	require.Equal(f.t, name, r.body["name"])
	require.EqualValues(f.t, engine.DefaultLeasePeriod.Milliseconds(), r.body["lease_period_ms"])
}

// enqueueRender enqueues a render job through the engine and waits until
// it is projected.
func (f *fixture) enqueueRender(payload string) string {
	f.t.Helper()
	res, err := f.engine().Enqueue(context.Background(), engine.Enqueue{Plugin: "render", Command: "handle", Payload: []byte(payload), By: events.ActorAPI})
	require.NoError(f.t, err)
	f.waitProjected()
	return res.JobID
}

// claim claims as worker name, waiting up to wait.
func (f *fixture) claim(name string, wait time.Duration) (response, *engine.Claimed) {
	f.t.Helper()
	r := f.do("POST", "/worker/claim", "worker", jsonBody(f.t, map[string]any{"worker": events.Worker{Name: name, PID: 42}, "wait_ms": wait.Milliseconds()}))
	if r.status != http.StatusOK {
		return r, nil
	}
	var body struct{ Claim *engine.Claimed }
	require.NoError(f.t, json.Unmarshal(r.raw, &body))
	return r, body.Claim
}

func fenceOf(name string, c *engine.Claimed) map[string]any {
	return map[string]any{"worker": events.Worker{Name: name, PID: 42}, "attempt": c.Attempt, "fence": c.Fence}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// A worker registers, claims a queued job at once, renews, streams
// stderr, progress and an export item, and completes it through the same
// path as a local completion: its routed child is enqueued. The fleet,
// and the worker's name on the attempt, read back.
func TestWorkerRunsAJobOverHTTP(t *testing.T) {
	f := startWorkers(t)
	f.registerWorker("gpu1")
	id := f.enqueueRender(`{"frame":1}`)

	r, c := f.claim("gpu1", 0)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, id, c.JobID)
	require.Equal(t, "render", c.Plugin)
	require.Equal(t, 1, c.Attempt)
	require.Positive(t, c.Fence)
	require.Contains(t, string(c.Request.Event), `"frame":1`)
	fence := fenceOf("gpu1", c)

	r = f.do("POST", "/worker/jobs/"+id+"/renew", "worker", jsonBody(t, fence))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, false, r.body["cancel_requested"])

	r = f.do("POST", "/worker/jobs/"+id+"/logs", "worker", jsonBody(t, with(fence, "line", 1,
		"lines", []events.StderrLine{{At: "2026-12-07T20:00:00Z", Text: "rendering"}})))
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))

	progress := 0.5
	r = f.do("POST", "/worker/jobs/"+id+"/control", "worker", jsonBody(t, with(fence,
		"progress", events.Progressed{Progress: &progress, Stage: "frames"},
		"export", events.Exported{Type: "text", Text: "frame 1 done"})))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, id+":1", r.body["export_item_id"])

	// The same workers' table while the lease holds.
	r = f.do("GET", "/workers", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var fleet struct{ Workers []views.FleetWorker }
	require.NoError(t, json.Unmarshal(r.raw, &fleet))
	require.Len(t, fleet.Workers, 1)
	w := fleet.Workers[0]
	require.Equal(t, "gpu1", w.Name)
	require.Equal(t, "gpu1.lan", w.Host)
	require.Equal(t, []string{"render"}, w.Plugins)
	require.Equal(t, 1, w.Claims)
	require.Equal(t, id, w.Leases[0].JobID)
	require.GreaterOrEqual(t, w.LastSeen, w.RegisteredAt)

	r = f.do("POST", "/worker/jobs/"+id+"/complete", "worker", jsonBody(t, with(fence, "job_id", id, "kind", "ok", "exit_code", 0,
		"response", json.RawMessage(`{"status":"ok","events":[{"type":"render.more","payload":{"frame":2}}]}`))))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "succeeded", r.body["status"])
	children := r.body["children"].([]any)
	require.Len(t, children, 1, "the routed child is enqueued, as for a local completion")

	f.waitProjected()
	child, err := views.Inspect(context.Background(), f.l, children[0].(string))
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, child.Job.Status)

	in, err := views.Inspect(context.Background(), f.l, id)
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, in.Job.Status)
	require.Len(t, in.Attempts, 1)
	require.Equal(t, "gpu1", in.Attempts[0].Worker, "job inspect names the worker of each attempt")
	lines, err := views.JobLogs(context.Background(), f.l, id)
	require.NoError(t, err)
	require.Contains(t, fmt.Sprint(lines), "rendering")

	require.NoError(t, json.Unmarshal(f.do("GET", "/workers", "jobs-ro", nil).raw, &fleet))
	require.Equal(t, 0, fleet.Workers[0].Claims, "the completion ended the lease")
	f.requireSeries(`ductile_worker_claims_total{plugin="render",worker="gpu1"} 1`, `ductile_worker_completions_total{outcome="ok",worker="gpu1"} 1`)
}

// A claim with nothing queued waits, then answers 204; one waiting is
// woken by an enqueue and gets the job.
func TestClaimWaitsForAJob(t *testing.T) {
	handling := make(chan struct{}, 16)
	f := startWorkers(t, signalEngine(handling))
	f.registerWorker("gpu1")
	r, _ := f.claim("gpu1", 50*time.Millisecond)
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))
	require.Empty(t, r.raw)

	for len(handling) > 0 {
		<-handling
	}
	got := make(chan *engine.Claimed, 1)
	go func() {
		_, c := f.claim("gpu1", engine.MaxClaimWait)
		got <- c
	}()
	<-handling // the claim is being handled: it finds nothing queued, and waits
	id := f.enqueueRender(`{}`)
	select {
	case c := <-got:
		require.NotNil(t, c)
		require.Equal(t, id, c.JobID)
	case <-time.After(engine.MaxClaimWait / 2):
		t.Fatal("the waiting claim was not woken by the enqueue")
	}
}

// signalEngine makes the API's Engine signal on handling each time a
// handler asks for it (the request is being handled), if there is room.
func signalEngine(handling chan struct{}) func(*api.Options) {
	return func(o *api.Options) {
		engineOf := o.Engine
		o.Engine = func() *engine.Engine {
			select {
			case handling <- struct{}{}:
			default:
			}
			return engineOf()
		}
	}
}

// A claim whose client goes away is freed: the server shuts down at once
// instead of waiting out the claim's wait. The client goes once the
// handler asked for the engine (it runs: its context ends when the server
// sees the connection closed).
func TestClaimHonoursTheRequestContext(t *testing.T) {
	handling := make(chan struct{}, 16)
	f := startWorkers(t, signalEngine(handling))
	f.registerWorker("gpu1")
	for len(handling) > 0 {
		<-handling
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", f.base+"/worker/claim",
		strings.NewReader(`{"worker":{"name":"gpu1"},"wait_ms":60000}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer worker")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-handling
	cancel()
	require.Error(t, <-done)
	shutdown, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	require.NoError(t, f.server.Shutdown(shutdown), "the abandoned claim still held its request")
}

// A claim waiting when the server begins to shut down answers 204 at
// once: it does not hold the shutdown for its wait.
func TestClaimEndsAtShutdown(t *testing.T) {
	handling := make(chan struct{}, 16)
	f := startWorkers(t, signalEngine(handling))
	f.registerWorker("gpu1")
	for len(handling) > 0 {
		<-handling
	}
	got := make(chan response, 1)
	go func() {
		r, _ := f.claim("gpu1", engine.MaxClaimWait)
		got <- r
	}()
	<-handling
	shutdown, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	require.NoError(t, f.server.Shutdown(shutdown), "the waiting claim held the shutdown")
	require.Equal(t, http.StatusNoContent, (<-got).status)
}

// What a worker sends under a fence that no longer holds the job is
// refused with 409 stale_fence and recorded as job.superseded, never
// applied.
func TestStaleFenceIsSuperseded(t *testing.T) {
	f := startWorkers(t)
	f.registerWorker("gpu1")
	id := f.enqueueRender(`{}`)
	_, c := f.claim("gpu1", 0)
	fence := fenceOf("gpu1", c)
	requireError(t, f.do("POST", "/worker/jobs/"+id+"/fail", "worker", jsonBody(t, with(fence, "job_id", "other", "error", "x"))),
		http.StatusBadRequest, "invalid_input")
	// engine.Failure's JSON, as a worker may send it.
	r := f.do("POST", "/worker/jobs/"+id+"/fail", "worker", jsonBody(t, engine.Failure{JobID: id, Worker: events.Worker{Name: "gpu1", PID: 42},
		Attempt: c.Attempt, Fence: c.Fence, Error: "the plugin could not start", ExitCode: -1}))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "dead", r.body["status"])

	bodies := map[string]map[string]any{"complete": with(fence, "kind", "ok"), "renew": fence,
		"logs": with(fence, "lines", []events.StderrLine{{At: "2026-12-07T20:00:00Z", Text: "late"}}), "fail": with(fence, "error", "late")}
	for _, route := range []string{"complete", "renew", "logs", "fail"} {
		r := f.do("POST", "/worker/jobs/"+id+"/"+route, "worker", jsonBody(t, bodies[route]))
		requireError(t, r, http.StatusConflict, "stale_fence")
		require.Contains(t, r.body["message"], "superseded")
	}
	requireError(t, f.do("POST", "/worker/jobs/"+id+"/control", "worker", jsonBody(t, with(fence, "export", events.Exported{Type: "text", Text: "late"}))),
		http.StatusConflict, "stale_fence")

	evs, err := f.l.ReadStream(context.Background(), events.JobStream(id))
	require.NoError(t, err)
	var refused []string
	for _, ev := range evs {
		if ev.Type == events.JobSuperseded {
			var s events.Superseded
			require.NoError(t, json.Unmarshal(ev.Data, &s))
			require.Equal(t, "gpu1", s.Worker)
			require.Equal(t, c.Fence, s.Fence)
			refused = append(refused, s.Refused)
		}
	}
	require.Equal(t, []string{"complete", "renew", "log", "complete"}, refused)
	in, err := views.Inspect(context.Background(), f.l, id)
	require.NoError(t, err)
	require.Equal(t, events.StatusDead, in.Job.Status, "nothing superseded was applied")
	f.requireSeries(`ductile_worker_completions_total{outcome="error",worker="gpu1"} 1`,
		`ductile_worker_superseded_total{refused="complete",worker="gpu1"} 2`,
		`ductile_worker_superseded_total{refused="renew",worker="gpu1"} 1`,
		`ductile_worker_superseded_total{refused="log",worker="gpu1"} 1`)
}

// A renewal tells the worker a cancel was asked for.
func TestRenewSaysCancelRequested(t *testing.T) {
	f := startWorkers(t)
	f.registerWorker("gpu1")
	id := f.enqueueRender(`{}`)
	_, c := f.claim("gpu1", 0)
	_, err := f.engine().Cancel(context.Background(), engine.Cancel{Job: id, Reason: "stop", By: events.ActorAPI})
	require.NoError(t, err)
	r := f.do("POST", "/worker/jobs/"+id+"/renew", "worker", jsonBody(t, fenceOf("gpu1", c)))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, true, r.body["cancel_requested"])
	// engine.Attempt's JSON, as a worker may send it.
	r = f.do("POST", "/worker/jobs/"+id+"/complete", "worker", jsonBody(t, engine.Attempt{JobID: id, Attempt: c.Attempt, Worker: events.Worker{Name: "gpu1", PID: 42},
		Kind: events.OutcomeCanceled, ExitCode: -1, Duration: time.Second, Stderr: "stopped", EndedAt: time.Now(), Fence: c.Fence}))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "canceled", r.body["status"])
}

// The worker scope grants the worker routes and nothing else; no other
// scope but * grants them. Bad requests are 400, unknown jobs 404, an
// unregistered worker 409 unknown_worker, big bodies 413.
func TestWorkerRoutesRefuse(t *testing.T) {
	f := startWorkers(t)
	requireError(t, f.do("GET", "/jobs", "worker", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("POST", "/plugin/render/handle", "worker", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("GET", "/workers", "worker", nil), http.StatusForbidden, "forbidden")
	requireError(t, f.do("GET", "/workers", "", nil), http.StatusUnauthorized, "unauthorized")

	claim := jsonBody(t, map[string]any{"worker": events.Worker{Name: "gpu1"}})
	requireError(t, f.do("POST", "/worker/claim", "worker", claim), http.StatusConflict, "unknown_worker")
	requireError(t, f.do("POST", "/worker/register", "worker", jsonBody(t, events.WorkerRegisteredData{Name: "has space",
		Plugins: []events.WorkerPlugin{renderPlugin}})), http.StatusBadRequest, "invalid_input")

	fenced := map[string]any{"worker": events.Worker{Name: "gpu1"}, "attempt": 1, "fence": 3}
	bodies := map[string]map[string]any{"renew": fenced, "logs": with(fenced, "lines", []any{}, "truncated", true),
		"control": with(fenced, "progress", map[string]any{}), "complete": with(fenced, "kind", "ok"), "fail": with(fenced, "error", "x")}
	big := jsonBody(t, map[string]any{"worker": events.Worker{Name: strings.Repeat("x", 70*1024)}})
	routes := []string{"/worker/register", "/worker/claim"}
	for _, r := range []string{"renew", "logs", "control", "complete", "fail"} {
		routes = append(routes, "/worker/jobs/nosuchjob/"+r)
		requireError(t, f.do("POST", "/worker/jobs/nosuchjob/"+r, "worker", jsonBody(t, bodies[r])), http.StatusNotFound, "not_found")
	}
	for _, route := range routes {
		requireError(t, f.do("POST", route, "", claim), http.StatusUnauthorized, "unauthorized")
		r := f.do("POST", route, "jobs-rw", claim)
		requireError(t, r, http.StatusForbidden, "forbidden")
		require.Equal(t, "worker", r.body["scope"])
		requireError(t, f.do("POST", route, "worker", []byte(`{"worker":`)), http.StatusBadRequest, "invalid_input")
		requireError(t, f.do("POST", route, "worker", big), http.StatusRequestEntityTooLarge, "too_large")
	}
}

// A ledger that fails makes every worker route answer 500 error.
func TestWorkerRoutesInternalError(t *testing.T) {
	f := startWorkers(t)
	f.projector.Stop()
	require.NoError(t, f.l.Close())
	fence := map[string]any{"worker": events.Worker{Name: "gpu1"}, "attempt": 1, "fence": 3}
	for route, body := range map[string]any{
		"/worker/register":     events.WorkerRegisteredData{Name: "gpu1", Plugins: []events.WorkerPlugin{renderPlugin}},
		"/worker/claim":        map[string]any{"worker": events.Worker{Name: "gpu1"}},
		"/worker/jobs/j/renew": fence, "/worker/jobs/j/logs": with(fence, "lines", []any{}, "truncated", true),
		"/worker/jobs/j/control":  with(fence, "progress", map[string]any{"stage": "x"}),
		"/worker/jobs/j/complete": with(fence, "kind", "ok"), "/worker/jobs/j/fail": with(fence, "error", "x"),
	} {
		requireError(t, f.do("POST", route, "worker", jsonBody(t, body)), http.StatusInternalServerError, "error")
	}
	requireError(t, f.do("GET", "/workers", "jobs-ro", nil), http.StatusInternalServerError, "error")
}
