package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const builtinSecret = "tok-e2e-0123456789-never-in-the-ledger"

// TestBundledHTTPThroughTheRealBinary runs the built-in http plugin as
// every plugin runs (the bundled root's entrypoint execs this binary's
// builtin command, protocol v2 on stdin and stdout) against a local server:
// success, a non-2xx status, a timeout and an oversized response; the
// secret from the config's ${VAR} reaches the server and is nowhere in the
// state directory (ledger, WAL) afterwards.
func TestBundledHTTPThroughTheRealBinary(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gotAuth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		switch r.URL.Path {
		case "/api/ok":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"echo":"`+r.Header.Get("Authorization")+`"}`)
		case "/api/broken":
			http.Error(w, "kaputt", http.StatusBadRequest)
		case "/api/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(waitTimeout):
			}
		case "/api/big":
			_, _ = io.WriteString(w, strings.Repeat("x", 300_000))
		}
	}))
	defer srv.Close()
	w := newJobWorld(t, `plugins:
  http:
    retry: {max_attempts: 1}
    config:
      base_url: `+srv.URL+`/api
      headers: {Authorization: "Bearer ${HTTP_TOKEN}"}
      max_response_bytes: 1000
`)
	env := cleanEnv(t, "HTTP_TOKEN="+builtinSecret)
	run := func(want int, payload string) runView {
		t.Helper()
		r := ductile(t, env, w.args("plugin", "run", "http", "--payload", payload, "--json")...)
		require.Equal(t, want, r.code, r.String())
		var v runView
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.String())
		var compact bytes.Buffer
		if len(v.Response) > 0 {
			require.NoError(t, json.Compact(&compact, v.Response))
			v.Response = compact.Bytes()
		}
		return v
	}

	ok := run(0, `{"url":"/ok"}`)
	require.Equal(t, "succeeded", ok.Status, "%+v", ok)
	require.Contains(t, string(ok.Response), `"status":200`)
	require.Contains(t, string(ok.Response), `"echo":"[redacted]"`, "what the server echoed is redacted")

	bad := run(1, `{"url":"/broken","method":"POST","body":{"a":1}}`)
	require.Equal(t, "dead", bad.Status)
	require.Contains(t, bad.Error, "status 400 Bad Request, expected 2xx: kaputt")

	slow := run(1, `{"url":"/slow","timeout":"300ms"}`)
	require.Equal(t, "dead", slow.Status)
	require.Contains(t, slow.Error, "no response within 300ms")

	big := run(0, `{"url":"/big"}`)
	require.Contains(t, string(big.Response), `"truncated":true`)
	require.Contains(t, string(big.Response), `"bytes":1000`)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, gotAuth, 4)
	for _, a := range gotAuth {
		require.Equal(t, "Bearer "+builtinSecret, a, "the secret reaches the server")
	}
	// Nothing in the state directory holds it: not the ledger, its WAL, a
	// log, an excerpt.
	require.NoError(t, filepath.WalkDir(w.state, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		require.False(t, bytes.Contains(data, []byte(builtinSecret)), "%s holds the secret", p)
		return nil
	}))
}

// TestBundledNotifyOnAFailedJob is the recipe of docs/plugins-bundled.md:
// an on-hook pipeline sends a notification, templated from the hook's
// payload, when a job of a plugin with notify_on_complete fails.
func TestBundledNotifyOnAFailedJob(t *testing.T) {
	t.Parallel()
	type note struct{ title, body string }
	got := make(chan note, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- note{r.Header.Get("Title"), string(body)}
	}))
	defer srv.Close()
	w := newJobWorld(t, `plugins:
  echo:
    notify_on_complete: true
    retry: {max_attempts: 1}
    config: {mode: error}
  notify:
    config:
      service: ntfy
      url: `+srv.URL+`/ductile-alerts
      title: "Ductile: {{.plugin}} failed"
      message: "{{.plugin}} {{.command}} failed: {{.error}}"
pipelines:
  - name: alert-on-failure
    on-hook: job.failed
    steps:
      - uses: notify.send
`)
	d := w.startDaemon()
	var ran runView
	w.runJSON(1, &ran, "plugin", "run", "echo", "--command", "poll", "--wait", "--json")
	require.Equal(t, "dead", ran.Status)
	select {
	case n := <-got:
		require.Equal(t, "Ductile: echo failed", n.title)
		require.Equal(t, "echo poll failed: echo poll: failing on purpose (mode=error)", n.body)
	case <-time.After(waitTimeout):
		t.Fatalf("no notification within %v", waitTimeout)
	}
	w.stopDaemon(d)
}

// TestBundledHTTPOnASchedule is the Home Assistant recipe of
// docs/plugins-bundled.md, firing every second instead of at 19:00: the
// daemon's scheduler runs the http plugin, which POSTs to the local
// "Home Assistant" with the token from the environment.
func TestBundledHTTPOnASchedule(t *testing.T) {
	t.Parallel()
	type call struct{ method, path, auth, body string }
	got := make(chan call, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- call{r.Method, r.URL.Path, r.Header.Get("Authorization"), string(body)}:
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[]`)
	}))
	defer srv.Close()
	w := newJobWorld(t, `plugins:
  http:
    retry: {max_attempts: 3}
    config:
      base_url: `+srv.URL+`/api
      headers:
        Authorization: "Bearer ${HA_TOKEN}"
      timeout: 10s
    schedules:
      - id: porch-light
        command: handle
        every: 1s
        payload:
          method: POST
          url: /services/light/turn_on
          body: {entity_id: light.porch}
`)
	p := start(t, cleanEnv(t, "HA_TOKEN="+builtinSecret), w.args("system", "start")...)
	p.waitLine(t, 0, messageIs("ductile started"))
	select {
	case c := <-got:
		require.Equal(t, call{"POST", "/api/services/light/turn_on", "Bearer " + builtinSecret, `{"entity_id":"light.porch"}`}, c)
	case <-time.After(waitTimeout):
		t.Fatalf("the schedule sent nothing within %v", waitTimeout)
	}
	w.stopDaemon(p)
}
