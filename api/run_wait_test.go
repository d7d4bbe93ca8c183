package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/events"
)

// TestWaitRun: GET /runs/{id}/wait answers a run once it ended (200),
// at once for one that had, and as it is past the wait (202); a waiting
// caller holds a place among api.max_concurrent_sync (one more is 503
// too_many_sync); it needs jobs:ro.
func TestWaitRun(t *testing.T) {
	f := start(t, func(o *api.Options) {
		o.Settings.MaxSyncTimeout, o.Settings.MaxConcurrentSync = 10*time.Second, 1
	})
	id, other := f.enqueue(`{}`), f.enqueue(`{}`)
	got := make(chan response, 1)
	go func() {
		for {
			// The poll below may hold the one place for a moment: try again.
			if r := f.do("GET", "/runs/"+id+"/wait?timeout_ms=10000", "jobs-ro", nil); r.status != http.StatusServiceUnavailable {
				got <- r
				return
			}
		}
	}()

	// Once the waiter holds the one place, another waiter is refused.
	deadline := time.Now().Add(10 * time.Second)
	var r response
	for r = f.do("GET", "/runs/"+other+"/wait?timeout_ms=0", "jobs-ro", nil); r.status != http.StatusServiceUnavailable; r = f.do("GET", "/runs/"+other+"/wait?timeout_ms=0", "jobs-ro", nil) {
		require.Equal(t, http.StatusAccepted, r.status, "the place is free: no wait, the run as it is: %s", r.raw)
		require.Equal(t, "queued", r.body["status"])
		require.True(t, time.Now().Before(deadline), "the waiter never took the place")
	}
	requireError(t, r, http.StatusServiceUnavailable, "too_many_sync")
	require.Equal(t, "1", r.header.Get("Retry-After"))

	attempt := f.startAttempt(id)
	f.end(id, attempt, events.OutcomeOK)
	r = <-got
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, id, r.body["run_id"])
	require.Equal(t, "succeeded", r.body["status"])

	r = f.do("GET", "/runs/"+id+"/wait", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, "an ended run at once: %s", r.raw)

	// Past the wait: 202, the run as it is now.
	r = f.do("GET", "/runs/"+other+"/wait?timeout_ms=1", "jobs-ro", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	require.Equal(t, "queued", r.body["status"])

	requireError(t, f.do("GET", "/runs/nothing-like-it/wait", "jobs-ro", nil), 404, "not_found")
	requireError(t, f.do("GET", "/runs/"+id+"/wait?timeout_ms=-1", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs/"+id+"/wait", "plugin-ro", nil), 403, "forbidden")
	requireError(t, f.do("GET", "/runs/"+id+"/wait", "", nil), 401, "unauthorized")
}
