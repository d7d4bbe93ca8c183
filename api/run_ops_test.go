package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// newRun creates a run of echo handle and returns its id.
func (f *fixture) newRun(task string) string {
	f.t.Helper()
	r := f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handle", "task_id": task})
	require.Equal(f.t, http.StatusAccepted, r.status, string(r.raw))
	return r.body["run_id"].(string)
}

// TestCancelAndRetryRun: a queued run is canceled at once (with its
// reason); a running one shows cancel_requested; an ended one is 409. A
// retry is a new run whose parent, root and attempt say where it comes
// from, and a run is retried once.
func TestCancelAndRetryRun(t *testing.T) {
	f := start(t, nil)
	id := f.newRun("")
	requireError(t, f.do("POST", "/runs/"+id+"/retry", "jobs-rw", nil), 409, "conflict") // queued: nothing to retry
	r := f.do("POST", "/runs/"+id+"/cancel", "jobs-rw", []byte(`{"reason":"not needed"}`))
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, map[string]any{"run_id": id, "status": "canceled"}, r.body)
	rec := f.do("GET", "/runs/"+id, "jobs-ro", nil).body
	require.Equal(t, "canceled", rec["status"])
	require.Equal(t, "not needed", rec["cancel_reason"])
	require.Equal(t, "CANCELED", rec["error"].(map[string]any)["code"])
	requireError(t, f.do("POST", "/runs/"+id+"/cancel", "jobs-rw", nil), 409, "conflict")

	r = f.do("POST", "/runs/"+id+"/retry", "jobs-rw", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	second := r.body["run_id"].(string)
	require.Equal(t, id, r.body["parent_run_id"])
	require.Equal(t, "queued", r.body["status"])
	requireError(t, f.do("POST", "/runs/"+id+"/retry", "jobs-rw", nil), 409, "conflict") // retried already

	// The retry runs and fails: retried again, the chain is three long.
	attempt := f.startAttempt(second)
	f.end(second, attempt, events.OutcomeError)
	rec = f.do("GET", "/runs/"+second, "jobs-ro", nil).body
	require.Equal(t, "failed", rec["status"])
	require.Equal(t, "PLUGIN_ERROR", rec["error"].(map[string]any)["code"])
	r = f.do("POST", "/runs/"+second+"/retry", "jobs-rw", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	third := r.body["run_id"].(string)
	rec = f.do("GET", "/runs/"+third, "jobs-ro", nil).body
	require.Equal(t, id, rec["root_run_id"])
	require.Equal(t, second, rec["parent_run_id"])
	require.Equal(t, float64(3), rec["attempt"])

	// A running run: cancel_requested at once, with when and why.
	running := f.newRun("")
	f.startAttempt(running)
	r = f.do("POST", "/runs/"+running+"/cancel", "jobs-rw", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "cancel_requested", r.body["status"])
	rec = f.do("GET", "/runs/"+running, "jobs-ro", nil).body
	require.Equal(t, "cancel_requested", rec["status"])
	require.Equal(t, true, rec["cancel_requested"])
	require.Equal(t, "canceled through the API", rec["cancel_reason"])
	require.NotNil(t, rec["cancel_requested_at"])

	missing := "0190aaaa-0000-7000-8000-000000000000"
	requireError(t, f.do("POST", "/runs/"+missing+"/cancel", "jobs-rw", nil), 404, "not_found")
	requireError(t, f.do("POST", "/runs/"+missing+"/retry", "jobs-rw", nil), 404, "not_found")
	long := strings.Repeat("a", 65)
	requireError(t, f.do("POST", "/runs/"+long+"/cancel", "jobs-rw", nil), 400, "invalid_input")
	requireError(t, f.do("POST", "/runs/"+long+"/retry", "jobs-rw", nil), 400, "invalid_input")
	requireError(t, f.do("POST", "/runs/"+running+"/cancel", "jobs-rw", []byte(`{"reason": 5}`)), 400, "invalid_input")
}

// TestRunExports: GET /runs/{id}/export pages a run's items oldest first
// with next_after, null after the last; a bad cursor is 400, an unknown
// run 404.
func TestRunExports(t *testing.T) {
	f := start(t, nil)
	id := f.newRun("")
	r := f.do("GET", "/runs/"+id+"/export", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, []any{}, r.body["items"])
	require.Nil(t, r.body["next_after"])
	require.Contains(t, r.body, "next_after")

	attempt := f.startAttempt(id)
	var want []string
	for _, text := range []string{"one", "two", "three", "four", "five"} {
		want = append(want, f.export(id, attempt, text).ExportItemID)
	}
	f.end(id, attempt, events.OutcomeOK)

	var got []string
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5)
		r := f.do("GET", "/runs/"+id+"/export?limit=2&after="+after, "jobs-ro", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		var out struct {
			Items []struct {
				ExportItemID string `json:"export_item_id"`
				RunID        string `json:"run_id"`
				Type         string `json:"type"`
				Text         string `json:"text"`
				CreatedAt    float64
			}
			NextAfter *string `json:"next_after"`
		}
		require.NoError(t, json.Unmarshal(r.raw, &out))
		require.LessOrEqual(t, len(out.Items), 2)
		for _, it := range out.Items {
			require.Equal(t, id, it.RunID)
			require.Equal(t, "text", it.Type)
			got = append(got, it.ExportItemID)
		}
		if out.NextAfter == nil {
			break
		}
		after = *out.NextAfter
	}
	require.Equal(t, want, got)
	rec := f.do("GET", "/runs/"+id, "jobs-ro", nil).body
	require.Equal(t, float64(5), rec["exports_count"])
	require.Len(t, rec["result_refs"], 5)

	requireError(t, f.do("GET", "/runs/"+id+"/export?after=bogus", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs/"+id+"/export?limit=0", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs/0190aaaa-0000-7000-8000-000000000000/export", "jobs-ro", nil), 404, "not_found")
}

// TestRunRoutesNeedTheirScopes: every route of the run resource answers
// 401 without a token and 403, naming its scope, to a token without it.
func TestRunRoutesNeedTheirScopes(t *testing.T) {
	f := start(t, nil)
	id := f.newRun("")
	for _, tc := range []struct{ method, path, wrong, scope string }{
		{"POST", "/runs", "jobs-rw", "plugin:ro"},
		{"GET", "/runs", "plugin-rw", "jobs:ro"},
		{"GET", "/runs/" + id, "events-ro", "jobs:ro"},
		{"GET", "/run/" + id, "events-ro", "jobs:ro"},
		{"POST", "/runs/" + id + "/cancel", "jobs-ro", "jobs:rw"},
		{"POST", "/runs/" + id + "/retry", "jobs-ro", "jobs:rw"},
		{"GET", "/runs/" + id + "/export", "plugin-rw", "jobs:ro"},
		{"GET", "/runs/stream", "events-ro", "jobs:ro"},
		{"GET", "/runs/" + id + "/export/stream", "events-ro", "jobs:ro"},
	} {
		requireError(t, f.do(tc.method, tc.path, "", nil), http.StatusUnauthorized, "unauthorized")
		r := f.do(tc.method, tc.path, tc.wrong, nil)
		requireError(t, r, http.StatusForbidden, "forbidden")
		require.Equal(t, tc.scope, r.body["scope"], "%s %s", tc.method, tc.path)
	}
}

// TestRunRoutesOnABrokenLedger: a ledger that fails answers 500 with code
// error on every route of the run resource that reads or writes it.
func TestRunRoutesOnABrokenLedger(t *testing.T) {
	f := start(t, nil)
	id := f.newRun("")
	f.projector.Stop()
	require.NoError(t, f.l.Close())
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/runs", `{"plugin_id":"echo","entry_id":"handle"}`}, {"GET", "/runs", ""}, {"GET", "/runs/" + id, ""},
		{"POST", "/runs/" + id + "/cancel", ""}, {"POST", "/runs/" + id + "/retry", ""}, {"GET", "/runs/" + id + "/export", ""},
	} {
		requireError(t, f.do(rt.method, rt.path, "admin", []byte(rt.body)), 500, "error")
	}
}
