package builtin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins/builtin"
)

// call runs the built-in plugin name on a protocol v2 request, as its
// process would (Run on stdin and stdout), and parses the response with the
// runner's own parser.
func call(t *testing.T, name, command string, config, payload any) (*pluginhost.Response, string) {
	t.Helper()
	cfg, err := json.Marshal(config)
	require.NoError(t, err)
	req := pluginhost.Request{JobID: "job-1", Command: command, Config: cfg, DeadlineAt: time.Now().Add(time.Minute)}
	if payload != nil {
		p, err := json.Marshal(payload)
		require.NoError(t, err)
		req.Event, err = json.Marshal(map[string]any{"type": "ductile.cli", "payload": json.RawMessage(p)})
		require.NoError(t, err)
	}
	line, err := json.Marshal(req)
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	code := builtin.Run(context.Background(), name, bytes.NewReader(append(line, '\n')), &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	resp, err := pluginhost.ParseResponse(stdout.Bytes())
	require.NoError(t, err, stdout.String())
	return resp, stdout.String()
}

func eventPayload(t *testing.T, r *pluginhost.Response) map[string]any {
	t.Helper()
	require.Len(t, r.Events, 1)
	var p map[string]any
	require.NoError(t, json.Unmarshal(r.Events[0].Payload, &p))
	return p
}

const secret = "s3cr3t-token-never-in-the-ledger"

func TestHTTPSendsTheRequestAndRecordsTheResponse(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotBody = r, must(io.ReadAll(r.Body))
		w.Header().Set("Content-Type", "application/json")
		// A careless server echoes the credentials back.
		_, _ = io.WriteString(w, `{"state":"on","auth":"`+r.Header.Get("Authorization")+`"}`)
	}))
	defer srv.Close()
	cfg := map[string]any{"base_url": srv.URL + "/api", "headers": map[string]any{"Authorization": "Bearer " + secret}}
	resp, raw := call(t, "http", "handle", cfg, map[string]any{
		"method": "post", "url": "/services/light/turn_on", "body": map[string]any{"entity_id": "light.porch"},
		"headers": map[string]any{"X-Trace": "42"},
	})
	require.Equal(t, pluginhost.StatusOK, resp.Status, raw)
	require.Equal(t, "POST", got.Method)
	require.Equal(t, "/api/services/light/turn_on", got.URL.Path)
	require.Equal(t, "Bearer "+secret, got.Header.Get("Authorization"), "the config's secret header is sent")
	require.Equal(t, "42", got.Header.Get("X-Trace"))
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))
	require.JSONEq(t, `{"entity_id":"light.porch"}`, string(gotBody))
	p := eventPayload(t, resp)
	require.Equal(t, "http.response", resp.Events[0].Type)
	require.EqualValues(t, 200, p["status"])
	require.Equal(t, false, p["truncated"])
	require.Equal(t, "on", p["json"].(map[string]any)["state"])
	require.NotContains(t, raw, secret, "the secret is never written out")
	require.Contains(t, raw, builtin.Redacted)
}

func TestHTTPConfigSecretsGoOnlyToTheBaseURL(t *testing.T) {
	t.Parallel()
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { auth = r.Header.Get("Authorization") }))
	defer srv.Close()
	cfg := map[string]any{"base_url": "http://ha.invalid:8123", "headers": map[string]any{"Authorization": "Bearer " + secret}}
	resp, raw := call(t, "http", "handle", cfg, map[string]any{"url": srv.URL + "/elsewhere"})
	require.Equal(t, pluginhost.StatusOK, resp.Status, raw)
	require.Empty(t, auth, "a payload's URL outside base_url gets no config header")
}

func TestHTTPNon2xxFailsRetryablyOnlyForServerErrors(t *testing.T) {
	t.Parallel()
	status := http.StatusInternalServerError
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "boom "+r.URL.Query().Get("key"))
	}))
	defer srv.Close()
	cfg := map[string]any{"query": map[string]any{"key": secret}}
	resp, raw := call(t, "http", "handle", cfg, map[string]any{"url": srv.URL})
	require.Equal(t, pluginhost.StatusError, resp.Status)
	require.True(t, *resp.Retry)
	require.Contains(t, resp.Error, "status 500 Internal Server Error, expected 2xx: boom "+builtin.Redacted)
	require.NotContains(t, raw, secret)

	status = http.StatusNotFound
	resp, _ = call(t, "http", "handle", cfg, map[string]any{"url": srv.URL})
	require.False(t, *resp.Retry, "a 404 will not change by itself")

	// An expected status is a success.
	resp, _ = call(t, "http", "handle", cfg, map[string]any{"url": srv.URL, "expect_status": []any{404}})
	require.Equal(t, pluginhost.StatusOK, resp.Status)
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	resp, _ := call(t, "http", "handle", nil, map[string]any{"url": srv.URL, "timeout": "200ms"})
	require.Equal(t, pluginhost.StatusError, resp.Status)
	require.True(t, *resp.Retry)
	require.Contains(t, resp.Error, "no response within 200ms")
}

func TestHTTPOversizedResponseIsCut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("é", 5000)) // 10,000 bytes
	}))
	defer srv.Close()
	resp, raw := call(t, "http", "handle", map[string]any{"max_response_bytes": 1001}, map[string]any{"url": srv.URL})
	require.Equal(t, pluginhost.StatusOK, resp.Status, raw)
	p := eventPayload(t, resp)
	require.Equal(t, true, p["truncated"])
	require.Equal(t, strings.Repeat("é", 500), p["body"], "cut at the cap, never inside a character")
	require.Contains(t, resp.Result, "truncated at max_response_bytes 1001")
}

func TestHTTPRefusesABadRequestWithoutRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		config, payload map[string]any
		want            string
	}{
		{nil, map[string]any{}, "no url"},
		{nil, map[string]any{"url": "ftp://x"}, "must be an http"},
		{map[string]any{"timeout": "soon"}, map[string]any{"url": "http://x"}, "not a positive duration"},
		{nil, map[string]any{"url": "http://x", "expect_status": 1000}, "not an HTTP status"},
		{map[string]any{"max_response_bytes": 1 << 30}, map[string]any{"url": "http://x"}, "max_response_bytes"},
	} {
		resp, _ := call(t, "http", "handle", tc.config, tc.payload)
		require.Equal(t, pluginhost.StatusError, resp.Status, tc.want)
		require.False(t, *resp.Retry, tc.want)
		require.Contains(t, resp.Error, tc.want)
	}
}

func TestRunRefusesAnotherProtocol(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := builtin.Run(context.Background(), "http", strings.NewReader(`{"protocol":1,"command":"handle"}`), &stdout, &stderr)
	require.Equal(t, 78, code)
	require.Contains(t, stderr.String(), "unsupported protocol 1")
	require.Empty(t, stdout.String())
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
