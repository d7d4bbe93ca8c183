package main_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerHTTPAgainstTheDaemon: a running daemon whose plugin render
// runs only on remote workers (not installed here) serves the worker
// routes: a worker registers, a claim waiting on the long-poll is woken by
// an enqueue and gets the job, its completion ends it; `worker list` reads
// the fleet while the daemon runs, /metrics counts the worker's claim, and
// a token made with the worker scope alone cannot read /jobs.
func TestWorkerHTTPAgainstTheDaemon(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
api: {listen: 127.0.0.1:0}
plugins:
  render: {runs_on: remote}
`)
	var reg struct {
		Name          string `json:"name"`
		LeasePeriodMS int64  `json:"lease_period_ms"`
	}
	w.doJSON(http.StatusOK, &reg, "POST", "/worker/register", map[string]any{"name": "gpu1", "host": "gpu1.lan", "version": "e2e",
		"plugins": []any{map[string]any{"name": "render", "version": "1", "commands": []any{map[string]any{"name": "handle", "type": "write"}},
			"concurrency_safe": true}}})
	require.Equal(t, "gpu1", reg.Name)
	require.Positive(t, reg.LeasePeriodMS)

	type claimed struct {
		Claim struct {
			JobID   string `json:"job_id"`
			Attempt int    `json:"attempt"`
			Fence   int64  `json:"fence"`
		} `json:"claim"`
	}
	got := make(chan claimed, 1)
	go func() {
		var c claimed
		code, raw, err := w.call("POST", "/worker/claim", map[string]any{"worker": map[string]any{"name": "gpu1", "pid": 1}, "wait_ms": 30000})
		if err == nil && code == http.StatusOK {
			_ = json.Unmarshal(raw, &c)
		}
		got <- c
	}()
	var accepted struct {
		JobID string `json:"job_id"`
	}
	w.doJSON(http.StatusAccepted, &accepted, "POST", "/plugin/render/handle", map[string]any{"frame": 1})
	c := <-got
	require.Equal(t, accepted.JobID, c.Claim.JobID, "the waiting claim got the job enqueued")

	var fleet []struct {
		Name   string `json:"name"`
		Claims int    `json:"claims"`
	}
	w.runJSON(0, &fleet, "worker", "list", "--json")
	require.Len(t, fleet, 1)
	require.Equal(t, 1, fleet[0].Claims)

	var done struct {
		Status string `json:"status"`
	}
	w.doJSON(http.StatusOK, &done, "POST", "/worker/jobs/"+c.Claim.JobID+"/complete", map[string]any{
		"worker": map[string]any{"name": "gpu1"}, "attempt": c.Claim.Attempt, "fence": c.Claim.Fence, "kind": "ok",
		"response": map[string]any{"status": "ok", "result": map[string]any{"frame": 1}}})
	require.Equal(t, "succeeded", done.Status)
	var job struct {
		Status string `json:"status"`
	}
	w.doJSON(http.StatusOK, &job, "GET", "/job/"+c.Claim.JobID, nil)
	require.Equal(t, "succeeded", job.Status)

	code, metrics := w.do("GET", "/metrics", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(metrics), `ductile_worker_claims_total{plugin="render",worker="gpu1"} 1`)
	require.Contains(t, string(metrics), `ductile_worker_completions_total{outcome="ok",worker="gpu1"} 1`)

	// A worker-scoped token: the worker routes only.
	workerKey := lastLine(mustRun(t, nil, w.args("config", "token", "create", "gpu1", "--scopes", "worker")...).stdout)
	mustRun(t, nil, w.args("system", "reload")...)
	for _, path := range []string{"/jobs", "/workers"} {
		req, err := http.NewRequest("GET", w.base+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+workerKey)
		res, err := w.client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusForbidden, res.StatusCode, path)
	}
	req, err := http.NewRequest("POST", w.base+"/worker/claim", strings.NewReader(`{"worker":{"name":"gpu1"}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+workerKey)
	res, err := w.client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNoContent, res.StatusCode, "the worker token claims (nothing queued)")
}
