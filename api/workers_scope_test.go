package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// A token limited to worker:plugin=render registers and claims render; a
// registration of another plugin, or a claim naming one, is 403
// plugin_not_permitted; a token limited to another plugin claims nothing
// of render's even under a name registered for it by nobody else; a
// plugin-limited token is no topic worker.
func TestWorkerTokenLimitedToPlugins(t *testing.T) {
	f := startWorkers(t)
	register := func(key, name string, plugins ...events.WorkerPlugin) response {
		return f.do("POST", "/worker/register", key, jsonBody(t, events.WorkerRegisteredData{Name: name, Host: "h", Version: "test", Plugins: plugins}))
	}
	other := events.WorkerPlugin{Name: "other", Version: "1", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}}

	r := register("render-only", "gpu", renderPlugin, other)
	requireError(t, r, http.StatusForbidden, "plugin_not_permitted")
	require.Contains(t, r.body["message"], `not plugin "other"`)
	require.Equal(t, "worker:plugin=other", r.body["scope"])
	require.Contains(t, r.body["hint"], "--scopes worker:plugin=other")
	require.Equal(t, http.StatusOK, register("render-only", "gpu", renderPlugin).status)

	id := f.enqueueRender(`{"n": 1}`)
	claim := func(key, name string, plugins []string) response {
		body := map[string]any{"worker": events.Worker{Name: name, PID: 1}, "wait_ms": 0}
		if plugins != nil {
			body["plugins"] = plugins
		}
		return f.do("POST", "/worker/claim", key, jsonBody(t, body))
	}
	requireError(t, claim("render-only", "gpu", []string{"render", "other"}), http.StatusForbidden, "plugin_not_permitted")

	// A token limited to another plugin registers a worker that also
	// lists render (refused), so it registers only other: render's job is
	// not its to claim.
	requireError(t, register("other-only", "cpu", renderPlugin), http.StatusForbidden, "plugin_not_permitted")
	require.Equal(t, http.StatusOK, register("other-only", "cpu", other).status)
	requireError(t, claim("other-only", "cpu", nil), http.StatusConflict, "unknown_worker") // other is not placed remote

	r = claim("render-only", "gpu", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, id, r.body["claim"].(map[string]any)["job_id"])

	// Its limit names plugins: it claims no topic messages, and renews and
	// finishes none.
	for path, body := range map[string]map[string]any{
		"/worker/topics/work.request/claim": {"worker": "gpu/1", "group": "g", "wait_ms": 0},
		"/worker/messages/m1/renew":         {"worker": "gpu/1", "group": "g", "fence": 1, "lease_ms": 1000},
		"/worker/messages/m1/finish":        {"worker": "gpu/1", "group": "g", "fence": 1, "status": "completed", "topic": "work.done"},
	} {
		r = f.do("POST", path, "render-only", jsonBody(t, body))
		requireError(t, r, http.StatusForbidden, "forbidden")
		require.Equal(t, "worker", r.body["scope"], path)
	}
}

// A worker name is bound to the token that registered it: another token
// registering, claiming or completing under it is 409 worker_name_taken,
// and the name's owner goes on; a name registered without any token
// binding before (an older registration) is taken by the first token.
func TestWorkerNameBoundToToken(t *testing.T) {
	f := startWorkers(t)
	f.registerWorker("gpu") // with token "worker"
	id := f.enqueueRender(`{"n": 1}`)

	r := f.do("POST", "/worker/register", "worker-2", jsonBody(t, events.WorkerRegisteredData{Name: "gpu", Host: "h", Version: "test",
		Plugins: []events.WorkerPlugin{renderPlugin}}))
	requireError(t, r, http.StatusConflict, "worker_name_taken")
	require.Contains(t, r.body["message"], `bound to the token "worker"`)
	require.Contains(t, r.body["hint"], "--name")

	r = f.do("POST", "/worker/claim", "worker-2", jsonBody(t, map[string]any{"worker": events.Worker{Name: "gpu", PID: 1}, "wait_ms": 0}))
	requireError(t, r, http.StatusConflict, "worker_name_taken")

	r, c := f.claim("gpu", time.Second)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, id, c.JobID)
	r = f.do("POST", "/worker/jobs/"+id+"/complete", "worker-2", jsonBody(t, with(fenceOf("gpu", c), "kind", "ok", "response", map[string]any{"status": "ok"})))
	requireError(t, r, http.StatusConflict, "worker_name_taken")
	r = f.do("POST", "/worker/jobs/"+id+"/renew", "worker-2", jsonBody(t, fenceOf("gpu", c)))
	requireError(t, r, http.StatusConflict, "worker_name_taken")
	r = f.do("POST", "/worker/jobs/"+id+"/complete", "worker", jsonBody(t, with(fenceOf("gpu", c), "kind", "ok", "response", map[string]any{"status": "ok"})))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))

	// The registration records the token's name.
	workers, err := f.engine().Workers(t.Context())
	require.NoError(t, err)
	require.Equal(t, "worker", workers["gpu"].Token)
	// Registering again with its own token is fine.
	f.registerWorker("gpu")
}
