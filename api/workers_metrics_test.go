package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// /metrics has per-worker series whose worker label is bounded by the
// registered workers: a registered worker's claims, leases, plugins and
// last seen; a request under a name no worker registered counts under
// (unregistered), however many names are sent. GET /runs/{id} names the
// worker of the attempt.
func TestWorkerSeriesAreBoundedByRegistrations(t *testing.T) {
	f := startWorkers(t)
	f.registerWorker("gpu1")
	id := f.enqueueRender(`{}`)
	_, c := f.claim("gpu1", 0)
	require.NotNil(t, c)
	f.requireSeries(`ductile_worker_claims_total{plugin="render",worker="gpu1"} 1`,
		`ductile_worker_leases{worker="gpu1"} 1`, `ductile_worker_plugins{worker="gpu1"} 1`)
	r := f.do("GET", "/metrics", "jobs-ro", nil)
	require.Contains(t, string(r.raw), `ductile_worker_last_seen_timestamp_seconds{worker="gpu1"} `)

	for _, ghost := range []string{"ghost-1", "ghost-2", "ghost-3"} {
		fence := map[string]any{"worker": events.Worker{Name: ghost}, "attempt": c.Attempt, "fence": c.Fence}
		r := f.do("POST", "/worker/jobs/"+id+"/renew", "worker", jsonBody(t, fence))
		requireError(t, r, http.StatusConflict, "stale_fence")
		require.Contains(t, r.body["message"], "is held by worker gpu1, not the worker that sent it", "a guessed fence under another name")
	}
	f.requireSeries(`ductile_worker_superseded_total{refused="renew",worker="(unregistered)"} 3`)
	r = f.do("GET", "/metrics", "jobs-ro", nil)
	require.NotContains(t, string(r.raw), "ghost")

	r = f.do("POST", "/worker/jobs/"+id+"/complete", "worker", jsonBody(t, with(fenceOf("gpu1", c), "kind", "ok", "response", map[string]any{"status": "ok"})))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	f.requireSeries(`ductile_worker_completions_total{outcome="ok",worker="gpu1"} 1`, `ductile_worker_leases{worker="gpu1"} 0`)

	// GET /runs/{id} names the attempt's worker, as job inspect does.
	r = f.do("GET", "/runs/"+id, "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	attempts := r.body["attempts"].([]any)
	require.Len(t, attempts, 1)
	require.Equal(t, map[string]any{"name": "gpu1", "pid": float64(42)}, attempts[0].(map[string]any)["worker"])
}
