package builtin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins/builtin"
)

// received is one request a fake notification service got.
type received struct {
	path   string
	header http.Header
	body   string
}

func fakeService(t *testing.T, status int) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- received{path: r.URL.Path, header: r.Header, body: string(must(io.ReadAll(r.Body)))}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// hookPayload is what an on-hook pipeline's first step gets.
var hookPayload = map[string]any{"job_id": "j-1", "plugin": "backup", "command": "poll", "status": "dead", "error": "disk full", "result": ""}

func TestNotifySendsToEachServiceInItsFormat(t *testing.T) {
	t.Parallel()
	message := `{{.plugin}} {{.command}} failed: {{.error}}`
	for _, tc := range []struct {
		service string
		check   func(t *testing.T, r received)
	}{
		{builtin.ServiceNtfy, func(t *testing.T, r received) {
			require.Equal(t, "/alerts", r.path)
			require.Equal(t, "backup poll failed: disk full", r.body)
			require.Equal(t, "Ductile: backup", r.header.Get("Title"))
			require.Equal(t, "Bearer "+secret, r.header.Get("Authorization"))
			require.Equal(t, "4", r.header.Get("Priority"))
		}},
		{builtin.ServiceGotify, func(t *testing.T, r received) {
			require.Equal(t, "/alerts/message", r.path)
			require.Equal(t, secret, r.header.Get("X-Gotify-Key"))
			require.JSONEq(t, `{"title":"Ductile: backup","message":"backup poll failed: disk full","priority":4}`, r.body)
		}},
		{builtin.ServiceDiscord, func(t *testing.T, r received) {
			require.JSONEq(t, `{"content":"**Ductile: backup**\nbackup poll failed: disk full"}`, r.body)
		}},
		{builtin.ServiceSlack, func(t *testing.T, r received) {
			require.JSONEq(t, `{"text":"*Ductile: backup*\nbackup poll failed: disk full"}`, r.body)
		}},
		{builtin.ServiceWebhook, func(t *testing.T, r received) {
			var body map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.body), &body))
			require.Equal(t, "backup poll failed: disk full", body["message"])
			require.Equal(t, "disk full", body["payload"].(map[string]any)["error"])
			require.Equal(t, secret, r.header.Get("X-Key"))
		}},
	} {
		t.Run(tc.service, func(t *testing.T) {
			t.Parallel()
			srv, got := fakeService(t, http.StatusOK)
			cfg := map[string]any{"service": tc.service, "url": srv.URL + "/alerts", "token": secret, "priority": 4,
				"title": "Ductile: {{.plugin}}", "message": message, "headers": map[string]any{"X-Key": secret}}
			resp, raw := call(t, "notify", "send", cfg, hookPayload)
			require.Equal(t, pluginhost.StatusOK, resp.Status, raw)
			tc.check(t, <-got)
			p := eventPayload(t, resp)
			require.Equal(t, "notify.sent", resp.Events[0].Type)
			require.Equal(t, "backup poll failed: disk full", p["message"])
			require.NotContains(t, raw, secret)
			require.NotContains(t, raw, srv.URL, "a webhook URL is a key: never recorded")
		})
	}
}

func TestNotifyTemplates(t *testing.T) {
	t.Parallel()
	srv, got := fakeService(t, http.StatusOK)
	cfg := map[string]any{"service": "ntfy", "url": srv.URL + "/t"}
	// Without a template: the payload's text.
	resp, raw := call(t, "notify", "handle", cfg, map[string]any{"text": "hello"})
	require.Equal(t, pluginhost.StatusOK, resp.Status, raw)
	require.Equal(t, "hello", (<-got).body)
	// The payload's own template, with the helpers.
	resp, raw = call(t, "notify", "handle", cfg, map[string]any{"template": `{{upper .name}} {{default "?" .missing}} {{truncate 3 .long}}`, "name": "x", "long": "abcdef"})
	require.Equal(t, pluginhost.StatusOK, resp.Status, raw)
	require.Equal(t, "X ? abc…", (<-got).body)
	// A broken template is refused, not retried, and nothing is sent.
	resp, _ = call(t, "notify", "handle", map[string]any{"service": "ntfy", "url": srv.URL, "message": "{{.x"}, map[string]any{})
	require.Equal(t, pluginhost.StatusError, resp.Status)
	require.False(t, *resp.Retry)
	require.Contains(t, resp.Error, "message template")
	resp, _ = call(t, "notify", "health", nil, nil)
	require.Equal(t, pluginhost.StatusOK, resp.Status, "unconfigured is not unhealthy")
	require.Contains(t, resp.Result, "not configured")
	resp, _ = call(t, "notify", "health", map[string]any{"service": "pager"}, nil)
	require.Contains(t, resp.Error, `service "pager" is not one of`)
}

func TestNotifyServiceErrors(t *testing.T) {
	t.Parallel()
	srv, got := fakeService(t, http.StatusTooManyRequests)
	resp, raw := call(t, "notify", "handle", map[string]any{"service": "discord", "url": srv.URL + "/api/webhooks/1/" + secret}, map[string]any{"text": "x"})
	<-got
	require.Equal(t, pluginhost.StatusError, resp.Status)
	require.True(t, *resp.Retry, "429: try again later")
	require.Contains(t, resp.Error, "discord answered 429 Too Many Requests: answer")
	require.NotContains(t, raw, secret)

	srv, got = fakeService(t, http.StatusUnauthorized)
	resp, _ = call(t, "notify", "handle", map[string]any{"service": "gotify", "url": srv.URL, "token": secret}, map[string]any{"text": strings.Repeat("x", 5000)})
	r := <-got
	require.False(t, *resp.Retry)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.body), &body))
	require.Len(t, []rune(body["message"].(string)), 4096, "clipped to what the service takes")
}
