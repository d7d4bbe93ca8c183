package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// publish publishes body to topic and returns the message's JSON.
func (f *fixture) publish(topic, body string, more map[string]any) map[string]any {
	f.t.Helper()
	in := map[string]any{"body": body}
	for k, v := range more {
		in[k] = v
	}
	raw, err := json.Marshal(in)
	require.NoError(f.t, err)
	r := f.do("POST", "/topics/"+topic+"/messages", "topics-rw", raw)
	require.Equal(f.t, http.StatusCreated, r.status, string(r.raw))
	return r.body
}

// TestTopicRoutesNeedTheirScopes: every topic route answers 401 without a
// token and 403 with one that lacks its scope; the worker scope opens the
// worker routes only, topics:ro the reads only.
func TestTopicRoutesNeedTheirScopes(t *testing.T) {
	f := start(t, nil)
	for _, tc := range []struct{ method, path, scope, lacking string }{
		{"POST", "/topics/t/messages", "topics:rw", "topics-ro"},
		{"GET", "/messages?topic=t", "topics:ro", "worker"},
		{"GET", "/messages/x", "topics:ro", "worker"},
		{"GET", "/conversations/x", "topics:ro", "jobs-ro"},
		{"GET", "/conversations/x/check?success_topic=a&failure_topic=b", "topics:ro", "worker"},
		{"POST", "/worker/topics/t/claim", "worker", "topics-rw"},
		{"POST", "/worker/messages/x/renew", "worker", "topics-rw"},
		{"POST", "/worker/messages/x/finish", "worker", "topics-rw"},
	} {
		requireError(t, f.do(tc.method, tc.path, "", nil), http.StatusUnauthorized, "unauthorized")
		r := f.do(tc.method, tc.path, tc.lacking, nil)
		requireError(t, r, http.StatusForbidden, "forbidden")
		require.Equal(t, tc.scope, r.body["scope"], "%s %s", tc.method, tc.path)
	}
}

// TestTopicPublishReadCheckInspect: the publish, read, check and inspect
// routes, and their refusals with stable codes.
func TestTopicPublishReadCheckInspect(t *testing.T) {
	f := start(t, nil)
	root := f.publish("ask.request", "question", map[string]any{"metadata": map[string]any{"lang": "en"}})
	require.Equal(t, root["id"], root["conversation_id"])
	require.Equal(t, "api", root["producer"], "the API's default producer")
	reply := f.publish("ask.done", "answer", map[string]any{"parent_id": root["id"], "producer": "me"})
	require.Equal(t, root["id"], reply["conversation_id"], "a follow-up inherits its parent's conversation")
	dry := f.do("POST", "/topics/ask.request/messages", "topics-rw", jsonBody(t, map[string]any{"body": "x", "dry_run": true}))
	require.Equal(t, http.StatusCreated, dry.status, string(dry.raw))

	// Refusals.
	requireError(t, f.do("POST", "/topics/ask.request/messages", "topics-rw", jsonBody(t, map[string]any{"body": "x", "metadata": []int{1}})), http.StatusBadRequest, "invalid_input")
	requireError(t, f.do("POST", "/topics/bad%20topic/messages", "topics-rw", jsonBody(t, map[string]any{"body": "x"})), http.StatusBadRequest, "invalid_input")
	requireError(t, f.do("POST", "/topics/ask.request/messages", "topics-rw", jsonBody(t, map[string]any{"body": "x", "parent_id": "nope"})), http.StatusNotFound, "not_found")
	requireError(t, f.do("POST", "/topics/ask.request/messages", "topics-rw", jsonBody(t, map[string]any{"body": strings.Repeat("x", 2000)})), http.StatusRequestEntityTooLarge, "too_large")

	f.waitProjected()
	r := f.do("GET", "/messages?conversation="+root["id"].(string), "topics-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	msgs := r.body["messages"].([]any)
	require.Len(t, msgs, 2)
	require.Equal(t, "question", msgs[0].(map[string]any)["body"])
	r = f.do("GET", "/messages?topic=ask.request&limit=1", "topics-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Len(t, r.body["messages"].([]any), 1)
	requireError(t, f.do("GET", "/messages", "topics-ro", nil), http.StatusBadRequest, "invalid_input")
	requireError(t, f.do("GET", "/messages?topic=ask.request&after=nope", "topics-ro", nil), http.StatusNotFound, "not_found")

	check := "/conversations/" + root["id"].(string) + "/check?success_topic=ask.done&failure_topic=ask.failed"
	r = f.do("GET", check, "topics-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "success", r.body["state"])
	require.Equal(t, "answer", r.body["reply"].(map[string]any)["body"])
	requireError(t, f.do("GET", "/conversations/"+root["id"].(string)+"/check", "topics-ro", nil), http.StatusBadRequest, "invalid_input")
	requireError(t, f.do("GET", "/conversations/nope/check?success_topic=a&failure_topic=b", "topics-ro", nil), http.StatusNotFound, "not_found")

	r = f.do("GET", "/messages/"+root["id"].(string), "topics-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, []any{}, r.body["claims"])
	requireError(t, f.do("GET", "/messages/nope", "topics-ro", nil), http.StatusNotFound, "not_found")
	requireError(t, f.do("GET", "/messages/"+strings.Repeat("x", 65), "topics-ro", nil), http.StatusBadRequest, "invalid_input")
	r = f.do("GET", "/conversations/"+root["id"].(string), "topics-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Len(t, r.body["messages"].([]any), 2)
	requireError(t, f.do("GET", "/conversations/nope", "topics-ro", nil), http.StatusNotFound, "not_found")
	requireError(t, f.do("GET", "/conversations/"+strings.Repeat("x", 65), "topics-ro", nil), http.StatusBadRequest, "invalid_input")
}

// TestTopicWorkerRoutes: a claim (200, and 204 when none comes within
// wait_ms), renewals and the finish, and the refusals of a stale fence
// (409 stale_fence, never applied), of an unknown message and of bad input.
func TestTopicWorkerRoutes(t *testing.T) {
	f := start(t, nil)
	m := f.publish("work.request", "do it", nil)
	f.waitProjected()
	claimPath := "/worker/topics/work.request/claim"
	r := f.do("POST", claimPath, "worker", jsonBody(t, map[string]any{"worker": "w1", "lease_ms": 60000}))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, m["id"], r.body["message"].(map[string]any)["id"])
	fence := r.body["fence"].(float64)
	began := time.Now()
	r = f.do("POST", claimPath, "worker", jsonBody(t, map[string]any{"worker": "w2", "wait_ms": 100}))
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))
	require.GreaterOrEqual(t, time.Since(began), 100*time.Millisecond, "it waited")
	requireError(t, f.do("POST", claimPath, "worker", jsonBody(t, map[string]any{})), http.StatusBadRequest, "invalid_input")
	requireError(t, f.do("POST", claimPath, "worker", jsonBody(t, map[string]any{"worker": strings.Repeat("w", 2000)})), http.StatusRequestEntityTooLarge, "too_large")

	id := m["id"].(string)
	renew := "/worker/messages/" + id + "/renew"
	r = f.do("POST", renew, "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": fence, "lease_ms": 60000}))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.NotEmpty(t, r.body["lease_until"])
	requireError(t, f.do("POST", renew, "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": fence + 7})), http.StatusConflict, "stale_fence")
	requireError(t, f.do("POST", "/worker/messages/nope/renew", "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": 2})), http.StatusNotFound, "not_found")
	requireError(t, f.do("POST", renew, "worker", jsonBody(t, map[string]any{"worker": "w1"})), http.StatusBadRequest, "invalid_input")
	requireError(t, f.do("POST", renew, "worker", jsonBody(t, map[string]any{"worker": strings.Repeat("w", 2000), "fence": 2})), http.StatusRequestEntityTooLarge, "too_large")

	finish := "/worker/messages/" + id + "/finish"
	requireError(t, f.do("POST", finish, "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": fence + 7, "status": "completed", "topic": "work.done", "body": "late"})), http.StatusConflict, "stale_fence")
	requireError(t, f.do("POST", finish, "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": fence, "status": "bogus"})), http.StatusBadRequest, "invalid_input")
	requireError(t, f.do("POST", "/worker/messages/nope/finish", "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": 2, "status": "completed", "topic": "work.done"})), http.StatusNotFound, "not_found")
	requireError(t, f.do("POST", finish, "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": fence, "status": "completed", "body": strings.Repeat("x", 2000)})), http.StatusRequestEntityTooLarge, "too_large")
	r = f.do("POST", finish, "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": fence, "status": "completed", "topic": "work.done", "body": "done"}))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "work.done", r.body["topic"])
	require.Equal(t, id, r.body["parent_id"])
	// Finished: the same finish again is stale, and publishes nothing more.
	requireError(t, f.do("POST", finish, "worker", jsonBody(t, map[string]any{"worker": "w1", "fence": fence, "status": "completed", "topic": "work.done", "body": "again"})), http.StatusConflict, "stale_fence")
	f.waitProjected()
	r = f.do("GET", "/messages?topic=work.done", "topics-ro", nil)
	require.Len(t, r.body["messages"].([]any), 1, fmt.Sprint(r.body))
	r = f.do("GET", "/messages/"+id, "topics-ro", nil)
	claims := r.body["claims"].([]any)
	require.Len(t, claims, 1)
	require.Equal(t, "terminal", claims[0].(map[string]any)["state"])
}

// TestTopicInternalError: a read that fails (the ledger is closed) is a
// 500 with code error.
func TestTopicInternalError(t *testing.T) {
	f := start(t, nil)
	f.projector.Stop()
	require.NoError(t, f.l.Close())
	fence := jsonBody(t, map[string]any{"worker": "w", "fence": 2, "status": "completed"})
	for _, rt := range []struct {
		method, path string
		body         []byte
	}{
		{"POST", "/topics/t/messages", jsonBody(t, map[string]any{"body": "x"})},
		{"GET", "/messages?topic=t", nil}, {"GET", "/messages/x", nil}, {"GET", "/conversations/x", nil},
		{"GET", "/conversations/x/check?success_topic=a&failure_topic=b", nil},
		{"POST", "/worker/topics/t/claim", jsonBody(t, map[string]any{"worker": "w"})},
		{"POST", "/worker/messages/x/renew", jsonBody(t, map[string]any{"worker": "w", "fence": 2})}, {"POST", "/worker/messages/x/finish", fence},
	} {
		requireError(t, f.do(rt.method, rt.path, "admin", rt.body), http.StatusInternalServerError, "error")
	}
}
