package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
	"github.com/ductile/ductile/webhooks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSecrets is a map-backed auth.Secrets.
type fakeSecrets map[string]string

func (s fakeSecrets) Secret(name string) ([]byte, bool) {
	v, ok := s[name]
	return []byte(v), ok
}

var _ auth.Secrets = fakeSecrets(nil)

const secret = "It's a Secret to Everybody"

// now is the clock timestamps are checked against.
var now = time.Unix(1_800_000_000, 0)

const testConfig = `
webhooks:
  endpoints:
    - {path: /hook, plugin: echo, secret_ref: hook}
    - {path: /hook/small, plugin: echo, secret_ref: hook, max_body_size: 16B}
    - {path: /hook/replay, plugin: echo, command: poll, secret_ref: hook, delivery_id_header: X-GitHub-Delivery}
    - {path: /hook/stamped, plugin: echo, secret_ref: hook, signature_header: X-Signature, timestamp_header: X-Timestamp, tolerance: 5m}
    - {path: /hook/nosecret, plugin: echo, secret_ref: missing}
`

type testBundle struct {
	l       *ledger.Ledger
	handler http.Handler
	started time.Time
	logs    *syncBuffer // the handler's log, JSON lines
	path    string      // the ledger's file
	api     atomic.Pointer[views.APIState]
	// engine is what Options.Engine answers: the config, with plugin echo
	// applied.
	engine atomic.Pointer[engine.Engine]
}

// echoApplied is a daemon's record of having loaded plugin echo, and two
// more (plugins_loaded 3).
var echoApplied = events.ConfigAppliedData{Plugins: []events.AppliedPlugin{{Name: "echo", Enabled: true,
	Commands: []events.AppliedCommand{{Name: "poll", Type: "read"}, {Name: "handle", Type: "write"}}},
	{Name: "two", Enabled: true}, {Name: "three", Enabled: true}}}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// take returns what was logged since the last take, one record a line.
func (s *syncBuffer) take() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(s.b.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			out = append(out, rec)
		}
	}
	s.b.Reset()
	return out
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(testConfig), 0o600))
	// As a user does before starting the daemon: ductile config lock.
	_, _, err := config.Lock(filepath.Join(dir, "config.yaml"))
	require.NoError(t, err)
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	require.NoError(t, err)
	path := filepath.Join(dir, "ductile.db")
	// A short busy timeout: TestHealthz makes the writes fail with a lock.
	l, err := ledger.Open(context.Background(), path, ledger.Options{Synchronous: "NORMAL", BusyTimeout: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	b := &testBundle{l: l, started: now.Add(-time.Hour), logs: &syncBuffer{}, path: path}
	b.api.Store(&views.APIState{Enabled: true, Listening: "127.0.0.1:8080"})
	b.engine.Store(engine.New(engine.Options{Ledger: l, Config: cfg, Applied: echoApplied}))
	b.handler = webhooks.New(webhooks.Options{
		Ledger:  l,
		Secrets: func() auth.Secrets { return fakeSecrets{"hook": secret} },
		Engine:  b.engine.Load,
		Health: func() webhooks.Health {
			return webhooks.Health{Started: b.started, API: *b.api.Load()}
		},
		Logger: slog.New(slog.NewJSONHandler(b.logs, nil)),
		Now:    func() time.Time { return now },
	})
	return b
}

// post sends body to path with headers; returns the status and body.
func (b *testBundle) post(t *testing.T, method, path string, body []byte, headers map[string]string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	b.handler.ServeHTTP(w, r)
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var out map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out), w.Body.String())
	return w.Code, out
}

// jobs are the job.enqueued payloads in the ledger, oldest first.
func (b *testBundle) jobs(t *testing.T) []views.Job {
	t.Helper()
	_, err := projections.New(b.l, projections.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).CatchUp(context.Background())
	require.NoError(t, err)
	q, err := views.ReadQueue(context.Background(), b.l, 0)
	require.NoError(t, err)
	return q.Jobs
}

func sig(content string) string { return webhooks.Sign([]byte(secret), []byte(content)) }

func TestDeliveryEnqueuesTheBodyAsPayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"action":"opened","number":7}`
	mac := sig(body)
	for i, header := range []string{mac, strings.TrimPrefix(mac, "sha256="), "SHA256=" + strings.TrimPrefix(mac, "sha256=")} {
		code, out := b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": header})
		require.Equal(t, http.StatusAccepted, code, "form %d: %v", i, out)
		require.NotEmpty(t, out["job_id"])
	}
	jobs := b.jobs(t)
	require.Len(t, jobs, 3)
	for _, j := range jobs {
		require.Equal(t, "echo", j.Plugin)
		require.Equal(t, "handle", j.Command)
		require.Equal(t, "webhook", j.SubmittedBy)
		require.JSONEq(t, body, string(j.Payload))
	}
}

func TestRefusedDeliveriesEnqueueNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"a":1}`
	good := sig(body)
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		headers map[string]string
		status  int
		code    string
	}{
		{name: "bad signature", path: "/hook", body: body, headers: map[string]string{"X-Hub-Signature-256": sig(`{"a":2}`)}, status: 403, code: "forbidden"},
		{name: "bad bare signature", path: "/hook", body: body, headers: map[string]string{"X-Hub-Signature-256": strings.TrimPrefix(sig(`{"a":2}`), "sha256=")}, status: 403, code: "forbidden"},
		{name: "signed with another secret", path: "/hook", body: body, headers: map[string]string{"X-Hub-Signature-256": webhooks.Sign([]byte("other"), []byte(body))}, status: 403, code: "forbidden"},
		{name: "missing signature", path: "/hook", body: body, status: 403, code: "forbidden"},
		{name: "malformed: not hex", path: "/hook", body: body, headers: map[string]string{"X-Hub-Signature-256": "sha256=zz"}, status: 403, code: "forbidden"},
		{name: "malformed: short", path: "/hook", body: body, headers: map[string]string{"X-Hub-Signature-256": good[:len(good)-2]}, status: 403, code: "forbidden"},
		{name: "malformed: other algorithm", path: "/hook", body: body, headers: map[string]string{"X-Hub-Signature-256": "sha1=" + strings.TrimPrefix(good, "sha256=")}, status: 403, code: "forbidden"},
		{name: "signature in another header", path: "/hook", body: body, headers: map[string]string{"X-Signature": good}, status: 403, code: "forbidden"},
		{name: "secret not defined", path: "/hook/nosecret", body: body, headers: map[string]string{"X-Hub-Signature-256": good}, status: 403, code: "forbidden"},
		{name: "oversize", path: "/hook/small", body: `{"a":"0123456789abcdef"}`, headers: map[string]string{"X-Hub-Signature-256": sig(`{"a":"0123456789abcdef"}`)}, status: 413, code: "too_large"},
		{name: "invalid JSON", path: "/hook", body: `{"a":`, headers: map[string]string{"X-Hub-Signature-256": sig(`{"a":`)}, status: 400, code: "invalid_input"},
		{name: "empty body", path: "/hook", body: ``, headers: map[string]string{"X-Hub-Signature-256": sig(``)}, status: 400, code: "invalid_input"},
		{name: "not UTF-8", path: "/hook", body: "{\"city\":\"Z\xfcrich\"}", headers: map[string]string{"X-Hub-Signature-256": sig("{\"city\":\"Z\xfcrich\"}")}, status: 400, code: "invalid_input"},
		{name: "unknown path", path: "/hook/nope", body: body, headers: map[string]string{"X-Hub-Signature-256": good}, status: 404, code: "not_found"},
		{name: "wrong method", method: http.MethodGet, path: "/hook", headers: map[string]string{"X-Hub-Signature-256": good}, status: 405, code: "invalid_input"},
		{name: "delivery id missing", path: "/hook/replay", body: body, headers: map[string]string{"X-Hub-Signature-256": good}, status: 400, code: "invalid_input"},
	}
	for _, tt := range tests {
		method := tt.method
		if method == "" {
			method = http.MethodPost
		}
		code, out := b.post(t, method, tt.path, []byte(tt.body), tt.headers)
		require.Equal(t, tt.status, code, "%s: %v", tt.name, out)
		require.Equal(t, tt.code, out["code"], tt.name)
		if tt.status == 403 {
			require.Equal(t, map[string]any{"code": "forbidden", "message": "forbidden"}, out, "%s: a refused signature says nothing more", tt.name)
		}
	}
	require.Empty(t, b.jobs(t))
}

// TestBadSignatureLogsWhy: the sender gets a bare 403; the daemon's log
// says which header the endpoint reads, whether the delivery had it, the
// other signature headers it had, and what to fix.
func TestBadSignatureLogsWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"a":1}`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		present bool
		others  []any
		fix     string
	}{
		{"in another header", map[string]string{"X-Signature": sig(body)}, false, []any{"X-Signature"},
			"the delivery signs in X-Signature, not X-Hub-Signature-256: set this endpoint's signature_header"},
		{"none at all", nil, false, nil, "the delivery has no X-Hub-Signature-256 header"},
		{"wrong secret", map[string]string{"X-Hub-Signature-256": webhooks.Sign([]byte("other"), []byte(body))}, true, nil,
			"does not match the body: check that the sender signs with the secret named by secret_ref"},
	} {
		b.logs.take()
		code, out := b.post(t, http.MethodPost, "/hook", []byte(body), tc.headers)
		require.Equal(t, http.StatusForbidden, code, tc.name)
		require.Equal(t, map[string]any{"code": "forbidden", "message": "forbidden"}, out, tc.name)
		logs := b.logs.take()
		require.Len(t, logs, 1, tc.name)
		rec := logs[0]
		require.Equal(t, "webhook refused: bad signature", rec["msg"], tc.name)
		require.Equal(t, "X-Hub-Signature-256", rec["signature_header"], tc.name)
		require.Equal(t, tc.present, rec["signature_present"], tc.name)
		if tc.others == nil {
			require.Empty(t, rec["other_signature_headers"], tc.name)
		} else {
			require.Equal(t, tc.others, rec["other_signature_headers"], tc.name)
		}
		require.Contains(t, rec["fix"], tc.fix, tc.name)
	}
}

func TestOversizeByContentLengthAndByStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := `{"a":"` + strings.Repeat("x", 64) + `"}`
	// Declared too large: refused before reading.
	code, _ := b.post(t, http.MethodPost, "/hook/small", []byte(big), map[string]string{"X-Hub-Signature-256": sig(big)})
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	// Not declared (chunked): refused past the cap while reading.
	r := httptest.NewRequest(http.MethodPost, "/hook/small", io.MultiReader(strings.NewReader(big)))
	r.ContentLength = -1
	r.Header.Set("X-Hub-Signature-256", sig(big))
	w := httptest.NewRecorder()
	b.handler.ServeHTTP(w, r)
	require.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	// Exactly the cap is accepted.
	exact := `{"a":"01234567"}` // 16 bytes
	require.Len(t, exact, 16)
	code, _ = b.post(t, http.MethodPost, "/hook/small", []byte(exact), map[string]string{"X-Hub-Signature-256": sig(exact)})
	require.Equal(t, http.StatusAccepted, code)
	require.Len(t, b.jobs(t), 1)
}

func TestReplayedDeliveryIDMakesOneJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"ref":"main"}`
	headers := map[string]string{"X-Hub-Signature-256": sig(body), "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}
	code, first := b.post(t, http.MethodPost, "/hook/replay", []byte(body), headers)
	require.Equal(t, http.StatusAccepted, code)
	code, again := b.post(t, http.MethodPost, "/hook/replay", []byte(body), headers)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, first["job_id"], again["job_id"])
	require.Equal(t, true, again["deduplicated"])
	headers["X-GitHub-Delivery"] = "another"
	code, other := b.post(t, http.MethodPost, "/hook/replay", []byte(body), headers)
	require.Equal(t, http.StatusAccepted, code)
	require.NotEqual(t, first["job_id"], other["job_id"])
	jobs := b.jobs(t)
	require.Len(t, jobs, 2)
	require.Equal(t, "poll", jobs[0].Command)
}

func TestSignedTimestamp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"id":"evt_1"}`
	send := func(ts int64, signedTS int64) int {
		stamp := strconv.FormatInt(ts, 10)
		code, _ := b.post(t, http.MethodPost, "/hook/stamped", []byte(body), map[string]string{
			"X-Timestamp": stamp,
			"X-Signature": sig(strconv.FormatInt(signedTS, 10) + "." + body),
		})
		return code
	}
	require.Equal(t, http.StatusAccepted, send(now.Unix(), now.Unix()))
	require.Equal(t, http.StatusAccepted, send(now.Unix()-300, now.Unix()-300), "at the tolerance")
	require.Equal(t, http.StatusForbidden, send(now.Unix()-301, now.Unix()-301), "stale")
	require.Equal(t, http.StatusForbidden, send(now.Unix()+301, now.Unix()+301), "from the future")
	require.Equal(t, http.StatusForbidden, send(now.Unix(), now.Unix()-1), "a timestamp other than the one signed")
	code, _ := b.post(t, http.MethodPost, "/hook/stamped", []byte(body), map[string]string{"X-Signature": sig(body)})
	require.Equal(t, http.StatusForbidden, code, "no timestamp, body alone signed")
	code, _ = b.post(t, http.MethodPost, "/hook/stamped", []byte(body), map[string]string{"X-Timestamp": "soon", "X-Signature": sig("soon." + body)})
	require.Equal(t, http.StatusForbidden, code, "a timestamp that is not a number")
	require.Len(t, b.jobs(t), 2)
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{}`
	for range 2 {
		code, _ := b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": sig(body)})
		require.Equal(t, http.StatusAccepted, code)
	}
	b.jobs(t) // brings the projections up to date
	code, out := b.post(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, map[string]any{"status": "ok", "uptime_seconds": float64(3600), "queue_depth": float64(2),
		"plugins_loaded": float64(3), "plugins_circuit_open": float64(0), "writes": map[string]any{"failing": false},
		"api": map[string]any{"enabled": true, "listening": "127.0.0.1:8080"}}, out)
	code, _ = b.post(t, http.MethodPost, "/healthz", nil, nil)
	require.Equal(t, http.StatusMethodNotAllowed, code)
}

// TestHealthzSaysTheAPIIsOff: a daemon whose API could not listen is
// degraded, and /healthz says why.
func TestHealthzSaysTheAPIIsOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	off := "127.0.0.1:8080 is not free (listen tcp 127.0.0.1:8080: bind: address already in use)"
	b.api.Store(&views.APIState{Enabled: true, Off: off})
	code, out := b.post(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, code, "the webhooks still serve")
	require.Equal(t, "degraded", out["status"])
	require.Equal(t, map[string]any{"enabled": true, "off": off}, out["api"])

	b.api.Store(&views.APIState{Enabled: false}) // api.enabled: false is no fault
	_, out = b.post(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, "ok", out["status"])
}

// TestHealthzWhileWritesFail: while the ledger's writes fail, /healthz is
// 503 unavailable and says since when.
func TestHealthzWhileWritesFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	intruder, err := sqlite.OpenConn(b.path, sqlite.OpenReadWrite)
	require.NoError(t, err)
	defer intruder.Close()
	end, err := sqlitex.ImmediateTransaction(intruder) // holds the write lock
	require.NoError(t, err)
	body := `{}`
	code, out := b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": sig(body)})
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	code, out = b.post(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "unavailable", out["status"])
	writes := out["writes"].(map[string]any)
	require.Equal(t, true, writes["failing"])
	require.NotEmpty(t, writes["since"])
	require.Contains(t, writes["last_error"], "database is locked")
	end(&err) // err is set: the intruder rolls back
	code, _ = b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": sig(body)})
	require.Equal(t, http.StatusAccepted, code)
	code, out = b.post(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", out["status"])
}

func TestVerify(t *testing.T) {
	t.Parallel()
	// GitHub's documented example (docs: validating webhook deliveries).
	const header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	require.True(t, webhooks.Verify([]byte(secret), header, []byte("Hello, World!")))
	require.Equal(t, header, webhooks.Sign([]byte(secret), []byte("Hello, World!")))
	require.False(t, webhooks.Verify([]byte(secret), header, []byte("Hello, World?")))
	require.False(t, webhooks.Verify([]byte(secret), "", []byte("")))
	require.False(t, webhooks.Verify([]byte(secret), "sha256=", []byte("")))
}
