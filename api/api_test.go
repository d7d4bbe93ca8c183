package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// fakeGuard grants each key its scopes with auth.Grants.
type fakeGuard map[string][]auth.Scope

func (g fakeGuard) Check(authorization string, need auth.Scope) (string, error) {
	key, ok := strings.CutPrefix(authorization, "Bearer ")
	scopes, known := g[key]
	if !ok || !known {
		return "", auth.ErrUnauthorized
	}
	if !auth.Grants(scopes, need) {
		return key, auth.ErrForbidden
	}
	return key, nil
}

// WorkerPlugins limits a key's worker routes as auth.Registry does.
func (g fakeGuard) WorkerPlugins(authorization string) ([]string, bool) {
	key, _ := strings.CutPrefix(authorization, "Bearer ")
	return auth.WorkerPlugins(g[key])
}

var _ auth.WorkerLimiter = fakeGuard{}

var guard = fakeGuard{
	"admin":       {auth.All},
	"plugin-ro":   {auth.PluginRO},
	"plugin-rw":   {auth.PluginRW},
	"jobs-ro":     {auth.JobsRO},
	"jobs-rw":     {auth.JobsRW},
	"events-ro":   {auth.EventsRO},
	"worker":      {auth.Worker},
	"worker-2":    {auth.Worker},
	"render-only": {config.WorkerPluginScope("render")},
	"other-only":  {config.WorkerPluginScope("other")},
	"topics-ro":   {auth.TopicsRO},
	"topics-rw":   {auth.TopicsRW},
}

var applied = events.ConfigAppliedData{
	Plugins: []events.AppliedPlugin{
		{Name: "echo", Enabled: true, Commands: []events.AppliedCommand{{Name: "poll", Type: "read"}, {Name: "handle", Type: "write"}}},
		{Name: "quiet", Enabled: false, Commands: []events.AppliedCommand{{Name: "poll", Type: "read"}}},
	},
	Skipped: []events.SkippedPlugin{{Name: "broken", Reason: "manifest: bad"}},
}

type fixture struct {
	t         *testing.T
	l         *ledger.Ledger
	projector *projections.Projector
	server    *api.Server
	base      string
	served    chan error
	engine    func() *engine.Engine
}

// start serves an API on a real ledger and a real 127.0.0.1 listener.
func start(t *testing.T, mutate func(*api.Options)) *fixture {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	projector := projections.New(l, projections.Options{Logger: slog.New(slog.DiscardHandler)})
	projector.Start(ctx)
	cfg := config.Default()
	opts := api.Options{
		Ledger: l, Projector: projector, Guard: guard,
		Settings: config.APIServer{MaxBodySize: 1024},
		Events: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, ": hello\n\n")
		}),
	}
	if mutate != nil {
		mutate(&opts)
	}
	if opts.Engine == nil {
		eng := engine.New(engine.Options{Ledger: opts.Ledger, Config: cfg, Applied: applied})
		opts.Engine = func() *engine.Engine { return eng }
	}
	s := api.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fixture{t: t, l: l, projector: projector, server: s, base: "http://" + ln.Addr().String(), served: make(chan error, 1), engine: opts.Engine}
	go func() { f.served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		require.NoError(t, <-f.served)
		projector.Stop()
		_ = l.Close() // TestInternalError closed it already
	})
	return f
}

type response struct {
	status int
	body   map[string]any
	raw    []byte
	header http.Header
}

// statuses records every status a test saw per route, for the OpenAPI test.
var statuses = struct {
	sync.Mutex
	seen map[string]map[int]bool
}{seen: map[string]map[int]bool{}}

func (f *fixture) do(method, path, key string, body []byte, headers ...string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.base+path, bytes.NewReader(body))
	require.NoError(f.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	return f.send(req)
}

// send sends req and records its status for the OpenAPI test.
func (f *fixture) send(req *http.Request) response {
	f.t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	r := response{status: res.StatusCode, raw: raw, header: res.Header}
	_ = json.Unmarshal(raw, &r.body)
	statuses.Lock()
	route := req.Method + " " + routeOf(req.Method, req.URL.Path)
	if statuses.seen[route] == nil {
		statuses.seen[route] = map[int]bool{}
	}
	statuses.seen[route][res.StatusCode] = true
	statuses.Unlock()
	return r
}

// routeOf turns a request's method and path into its OpenAPI path
// template.
func routeOf(method, path string) string {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 4 && parts[1] == "plugin" && method == http.MethodPost:
		return "/plugin/{plugin}/{command}"
	case len(parts) >= 3 && parts[1] == "plugin":
		parts[2] = "{plugin}"
	case len(parts) == 3 && parts[1] == "pipeline":
		return "/pipeline/{name}"
	case len(parts) == 3 && parts[1] == "pipelines":
		return "/pipelines/{name}"
	case len(parts) >= 4 && parts[1] == "worker" && parts[2] == "jobs":
		parts[3] = "{id}"
	case len(parts) >= 4 && parts[1] == "worker" && parts[2] == "messages":
		parts[3] = "{id}"
	case len(parts) >= 4 && parts[1] == "worker" && parts[2] == "topics":
		parts[3] = "{topic}"
	case len(parts) >= 3 && parts[1] == "topics":
		parts[2] = "{topic}"
	case len(parts) >= 3 && (parts[1] == "messages" || parts[1] == "conversations"):
		parts[2] = "{id}"
	case len(parts) >= 3 && (parts[1] == "job" || parts[1] == "run"):
		parts[2] = "{id}"
	case len(parts) >= 3 && parts[1] == "runs" && parts[2] != "stream":
		parts[2] = "{id}"
	}
	return strings.Join(parts, "/")
}

// enqueue queues an echo handle job through the API and waits until it is
// projected.
func (f *fixture) enqueue(payload string) string {
	f.t.Helper()
	r := f.do("POST", "/plugin/echo/handle", "plugin-rw", []byte(payload))
	require.Equal(f.t, http.StatusAccepted, r.status, string(r.raw))
	id := r.body["job_id"].(string)
	f.waitProjected()
	return id
}

func (f *fixture) waitProjected() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(f.t, f.projector.WaitFor(ctx, f.l.Head()))
}

func requireError(t *testing.T, r response, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.status, string(r.raw))
	require.Equal(t, code, r.body["code"], string(r.raw))
	require.NotEmpty(t, r.body["message"], string(r.raw))
}

func TestEnqueue(t *testing.T) {
	f := start(t, nil)
	id := f.enqueue(`{"n": 1}`)
	r := f.do("GET", "/job/"+id, "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "queued", r.body["status"])
	require.Equal(t, "echo", r.body["plugin"])
	require.Equal(t, "api", r.body["submitted_by"])

	// The same Idempotency-Key while the first is queued is not a duplicate
	// (only a success within the window is), so both are queued.
	a := f.do("POST", "/plugin/echo/handle", "plugin-rw", []byte(`{}`), "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, a.status, string(a.raw))
	require.Equal(t, false, a.body["deduped"])

	// No body: no payload.
	r = f.do("POST", "/plugin/echo/poll", "plugin-ro", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))

	requireError(t, f.do("POST", "/plugin/echo/handle", "plugin-rw", []byte(`{not json`)), 400, "invalid_input")
	requireError(t, f.do("POST", "/plugin/nosuch/handle", "plugin-rw", nil), 404, "not_found")
	r = f.do("POST", "/plugin/ecoh/handle", "plugin-rw", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["message"], `did you mean "echo"`)
	r = f.do("POST", "/plugin/echo/handel", "plugin-rw", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["hint"], "poll, handle")
	requireError(t, f.do("POST", "/plugin/quiet/poll", "plugin-rw", nil), 409, "conflict")
	requireError(t, f.do("POST", "/plugin/broken/poll", "plugin-rw", nil), 409, "conflict")
	requireError(t, f.do("POST", "/plugin/echo/handle", "plugin-rw", bytes.Repeat([]byte(" "), 2000)), 413, "too_large")
	// A body exactly at the cap is accepted.
	body := append([]byte(`{"a":"`), bytes.Repeat([]byte("a"), 1024-8)...)
	body = append(body, `"}`...)
	require.Equal(t, http.StatusAccepted, f.do("POST", "/plugin/echo/handle", "plugin-rw", body).status)
}

func TestJobReads(t *testing.T) {
	f := start(t, nil)
	id := f.enqueue(`{"n": 1}`)
	f.enqueue(`{"n": 2}`)

	r := f.do("GET", "/jobs?status=queued&plugin=echo&limit=1", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Len(t, r.body["jobs"], 1)
	requireError(t, f.do("GET", "/jobs?status=bogus", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/jobs?limit=0", "jobs-ro", nil), 400, "invalid_input")

	r = f.do("GET", "/job/"+id+"/tree", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, id, r.body["job_id"])
	require.Equal(t, id, r.body["root_job_id"])
	require.Len(t, r.body["jobs"], 1)
	require.Equal(t, false, r.body["truncated"])

	r = f.do("GET", "/job/"+id+"/events", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	evs := r.body["events"].([]any)
	require.Equal(t, "job.enqueued", evs[0].(map[string]any)["type"])

	r = f.do("GET", "/job/"+id+"/logs", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Empty(t, r.body["lines"])

	missing := "0190aaaa-0000-7000-8000-000000000000"
	for _, path := range []string{"/job/" + missing, "/job/" + missing + "/tree", "/job/" + missing + "/events", "/job/" + missing + "/logs"} {
		requireError(t, f.do("GET", path, "jobs-ro", nil), 404, "not_found")
	}
	requireError(t, f.do("POST", "/job/"+missing+"/cancel", "jobs-rw", nil), 404, "not_found")
	requireError(t, f.do("POST", "/job/"+missing+"/retry", "jobs-rw", nil), 404, "not_found")
	long := strings.Repeat("a", 65)
	for _, path := range []string{"/job/" + long, "/job/" + long + "/tree", "/job/" + long + "/events", "/job/" + long + "/logs"} {
		requireError(t, f.do("GET", path, "jobs-ro", nil), 400, "invalid_input")
	}
	requireError(t, f.do("POST", "/job/"+long+"/cancel", "jobs-rw", nil), 400, "invalid_input")
	requireError(t, f.do("POST", "/job/"+long+"/retry", "jobs-rw", nil), 400, "invalid_input")

	r = f.do("GET", "/queue?limit=1", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, float64(2), r.body["counts"].(map[string]any)["queued"])
	require.Equal(t, float64(1), r.body["more"])
	requireError(t, f.do("GET", "/queue?limit=-1", "jobs-ro", nil), 400, "invalid_input")

	r = f.do("GET", "/plugins", "plugin-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	plugins := r.body["plugins"].([]any)
	require.Len(t, plugins, 2)
	require.Equal(t, "unknown", plugins[0].(map[string]any)["health"].(map[string]any)["status"])
	require.Len(t, r.body["skipped"], 1)
}

func TestCancelAndRetry(t *testing.T) {
	f := start(t, nil)
	id := f.enqueue(`{}`)
	requireError(t, f.do("POST", "/job/"+id+"/retry", "jobs-rw", nil), 409, "conflict") // queued: not retryable
	r := f.do("POST", "/job/"+id+"/cancel?reason=test", "jobs-rw", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "canceled", r.body["status"])
	requireError(t, f.do("POST", "/job/"+id+"/cancel", "jobs-rw", nil), 409, "conflict")

	r = f.do("POST", "/job/"+id+"/retry", "jobs-rw", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	require.Equal(t, id, r.body["retry_of"])
	retry := r.body["job_id"].(string)
	require.NotEqual(t, id, retry)
	f.waitProjected()
	r = f.do("GET", "/job/"+id, "jobs-ro", nil)
	require.Equal(t, retry, r.body["retried_as"])
	r = f.do("POST", "/job/"+id+"/retry", "jobs-rw", nil)
	requireError(t, r, 409, "conflict")
	require.Contains(t, r.body["hint"], retry)
}

func TestHealthz(t *testing.T) {
	f := start(t, nil)
	f.enqueue(`{}`)
	r := f.do("GET", "/healthz", "", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "ok", r.body["status"])
	require.Equal(t, float64(1), r.body["queue_depth"])
	require.Equal(t, float64(1), r.body["plugins_loaded"])
	require.Equal(t, float64(0), r.body["plugins_circuit_open"])
	require.Contains(t, r.body, "uptime_seconds")
	require.Equal(t, float64(0), r.body["projector_lag"].(map[string]any)["events"])
}

// TestScopes is the token × route → status table.
func TestScopes(t *testing.T) {
	f := start(t, nil)
	id := f.enqueue(`{}`)
	missing := "0190aaaa-0000-7000-8000-000000000000"
	type route struct{ method, path string }
	routes := []route{
		{"POST", "/plugin/echo/poll"}, {"POST", "/plugin/echo/handle"},
		{"GET", "/job/" + id}, {"GET", "/jobs"}, {"GET", "/job/" + id + "/tree"}, {"GET", "/job/" + id + "/events"},
		{"GET", "/job/" + id + "/logs"}, {"POST", "/job/" + missing + "/cancel"}, {"POST", "/job/" + missing + "/retry"},
		{"GET", "/plugins"}, {"GET", "/queue"}, {"GET", "/healthz"}, {"GET", "/events"}, {"GET", "/metrics"},
		{"GET", "/openapi.json"}, {"POST", "/pipeline/nosuch"}, {"GET", "/runs"}, {"GET", "/run/" + missing},
	}
	// want[token][i] is the status of routes[i].
	want := map[string][]int{
		"":          {401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 200, 401, 401, 200, 401, 401, 401},
		"bogus":     {401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 200, 401, 401, 200, 401, 401, 401},
		"admin":     {202, 202, 200, 200, 200, 200, 200, 404, 404, 200, 200, 200, 200, 404, 200, 404, 200, 404},
		"plugin-ro": {202, 403, 403, 403, 403, 403, 403, 403, 403, 200, 403, 200, 403, 403, 200, 403, 403, 403},
		"plugin-rw": {202, 202, 403, 403, 403, 403, 403, 403, 403, 200, 403, 200, 403, 403, 200, 404, 403, 403},
		"jobs-ro":   {403, 403, 200, 200, 200, 200, 200, 403, 403, 403, 200, 200, 403, 404, 200, 403, 200, 404},
		"jobs-rw":   {403, 403, 200, 200, 200, 200, 200, 404, 404, 403, 200, 200, 403, 404, 200, 403, 200, 404},
		"events-ro": {403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 200, 200, 403, 200, 403, 403, 403},
	}
	for token, statuses := range want {
		for i, rt := range routes {
			r := f.do(rt.method, rt.path, token, nil)
			require.Equal(t, statuses[i], r.status, "token %q %s %s: %s", token, rt.method, rt.path, r.raw)
			if r.status >= 400 {
				require.NotEmpty(t, r.body["code"], "token %q %s %s: %s", token, rt.method, rt.path, r.raw)
			}
		}
	}
	r := f.do("GET", "/jobs", "", nil)
	require.Contains(t, r.body["hint"], "ductile config token create")
}

func TestNoGuard(t *testing.T) {
	f := start(t, func(o *api.Options) { o.Guard = nil })
	r := f.do("GET", "/jobs", "admin", nil)
	requireError(t, r, 401, "unauthorized")
	require.Contains(t, r.body["hint"], "ductile config token create NAME --scopes jobs:ro")
	require.Equal(t, 200, f.do("GET", "/healthz", "", nil).status)
}

func TestHostCheck(t *testing.T) {
	f := start(t, nil)
	requireError(t, f.do("GET", "/healthz", "", nil, "Host", "evil.example:8080"), 403, "forbidden")
	requireError(t, f.do("GET", "/jobs", "admin", nil, "Host", "rebound.example"), 403, "forbidden")
	for _, host := range []string{"localhost:1", "127.0.0.1", "[::1]:8080", "LOCALHOST"} {
		require.Equal(t, 200, f.do("GET", "/healthz", "", nil, "Host", host).status, host)
	}
}

func TestUnknownRoute(t *testing.T) {
	f := start(t, nil)
	requireError(t, f.do("GET", "/nosuch", "admin", nil), 404, "not_found")
	requireError(t, f.do("GET", "/events", "admin", bytes.Repeat([]byte("x"), 2000)), 413, "too_large")
}

func TestMountedHandlers(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "# metrics\n") })
	f := start(t, func(o *api.Options) { o.Metrics = metrics })
	r := f.do("GET", "/metrics", "jobs-ro", nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, "# metrics\n", string(r.raw))
	r = f.do("GET", "/events", "events-ro", nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, ": hello\n\n", string(r.raw))
}

// TestShutdownFinishesInFlight: a request under way when Shutdown begins
// gets its answer; a stream ends.
func TestShutdownFinishesInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	streamEnded := make(chan struct{})
	f := start(t, func(o *api.Options) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			_, _ = io.WriteString(w, "done")
		})
		o.Events = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
			close(streamEnded)
		})
	})
	got := make(chan response, 1)
	go func() { got <- f.do("GET", "/metrics", "admin", nil) }()
	<-entered
	stream, err := http.NewRequest("GET", f.base+"/events", nil)
	require.NoError(t, err)
	stream.Header.Set("Authorization", "Bearer admin")
	res, err := http.DefaultClient.Do(stream)
	require.NoError(t, err)
	defer res.Body.Close()

	shutdown := make(chan error, 1)
	go func() { shutdown <- f.server.Shutdown(context.Background()) }()
	<-streamEnded // Shutdown began: the stream was told to end
	select {
	case <-shutdown:
		t.Fatal("Shutdown returned before the request under way finished")
	default:
	}
	close(release)
	r := <-got
	require.Equal(t, 200, r.status)
	require.Equal(t, "done", string(r.raw))
	require.NoError(t, <-shutdown)
}

func TestOpenAPI(t *testing.T) {
	f := start(t, nil)
	r := f.do("GET", "/openapi.json", "", nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, "3.1.0", r.body["openapi"])
	paths := r.body["paths"].(map[string]any)
	for _, p := range []string{"/plugin/{plugin}/{command}", "/job/{id}", "/jobs", "/job/{id}/tree", "/job/{id}/events",
		"/job/{id}/logs", "/job/{id}/cancel", "/job/{id}/retry", "/plugins", "/queue", "/healthz", "/pipeline/{name}",
		"/runs", "/run/{id}"} {
		require.Contains(t, paths, p)
	}
	// Every route the router serves through huma is in the document.
	doc := f.server.OpenAPI()
	require.Len(t, doc.Paths, len(paths))
}

type opRef struct{ responses []string }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestInternalError: a ledger that fails answers 500 with code error on
// every route that reads or writes it.
func TestInternalError(t *testing.T) {
	f := start(t, nil)
	id := f.enqueue(`{}`)
	f.projector.Stop()
	require.NoError(t, f.l.Close())
	for _, rt := range [][2]string{
		{"POST", "/plugin/echo/handle"}, {"GET", "/job/" + id}, {"GET", "/jobs"}, {"GET", "/job/" + id + "/tree"},
		{"GET", "/job/" + id + "/events"}, {"GET", "/job/" + id + "/logs"}, {"POST", "/job/" + id + "/cancel"},
		{"POST", "/job/" + id + "/retry"}, {"GET", "/plugins"}, {"GET", "/queue"}, {"GET", "/healthz"},
		{"GET", "/runs"}, {"GET", "/run/" + id}, {"GET", "/schedules"},
	} {
		requireError(t, f.do(rt[0], rt[1], "admin", nil), 500, "error")
	}
}
