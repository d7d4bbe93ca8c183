package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// createRun posts body (JSON of v) to POST /runs with token.
func (f *fixture) createRun(token string, v any) response {
	f.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(f.t, err)
	return f.do("POST", "/runs", token, b)
}

// startAttempt starts run id's next attempt, as a dispatcher would.
func (f *fixture) startAttempt(id string) int {
	f.t.Helper()
	st, err := commands.StartJob(context.Background(), f.l, commands.Start{JobID: id, Timeout: time.Minute, Now: time.Now()})
	require.NoError(f.t, err)
	return st.Attempt
}

// export records an export item of run id's running attempt.
func (f *fixture) export(id string, attempt int, text string) events.Exported {
	f.t.Helper()
	item, _, err := commands.RecordExport(context.Background(), f.l, commands.Export{JobID: id, Attempt: attempt,
		Item: events.Exported{Type: events.ExportText, Text: text}})
	require.NoError(f.t, err)
	return item
}

// end ends run id's running attempt with outcome kind (not retryable).
func (f *fixture) end(id string, attempt int, kind events.Outcome) {
	f.t.Helper()
	out := commands.Outcome{Kind: kind, Response: json.RawMessage(`{"status":"ok","result":"done"}`)}
	if kind != events.OutcomeOK {
		out = commands.Outcome{Kind: kind, Error: "boom", ExitCode: 1}
	}
	_, err := commands.CompleteJob(context.Background(), f.l, commands.Complete{JobID: id, Attempt: attempt, Outcome: out, Now: time.Now()})
	require.NoError(f.t, err)
}

// TestCreateRun: POST /runs queues a plugin run and answers 202 with its
// id and status once durable; GET /runs/{id} is its RunRecord; what
// POST /plugin refuses, POST /runs refuses alike.
func TestCreateRun(t *testing.T) {
	f := start(t, nil)
	r := f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handle", "args": map[string]any{"n": 1},
		"task_id": "task-1", "trace_id": "trace-1"})
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	require.Equal(t, "queued", r.body["status"])
	require.Equal(t, false, r.body["existing"])
	id := r.body["run_id"].(string)

	r = f.do("GET", "/runs/"+id, "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	for k, v := range map[string]any{"run_id": id, "kind": "plugin", "plugin_id": "echo", "entry_id": "handle", "status": "queued",
		"task_id": "task-1", "trace_id": "trace-1", "root_run_id": id, "attempt": float64(1), "progress": nil, "cancel_requested": false} {
		require.Equal(t, v, r.body[k], k)
	}
	// The job is the run: GET /job/{id} reads the same, with the args as payload.
	require.Equal(t, http.StatusOK, f.do("GET", "/job/"+id, "jobs-ro", nil).status)
	// POST /plugin makes the same thing, with a task and a trace too.
	r = f.do("POST", "/plugin/echo/handle?task_id=task-2&trace_id=trace-2", "plugin-rw", []byte(`{}`))
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	r = f.do("GET", "/runs/"+r.body["job_id"].(string), "jobs-ro", nil)
	require.Equal(t, "task-2", r.body["task_id"])
	require.Equal(t, "trace-2", r.body["trace_id"])
	require.Equal(t, "plugin", r.body["kind"])
	// By its short id too.
	require.Equal(t, id, f.do("GET", "/runs/"+id[len(id)-12:], "jobs-ro", nil).body["run_id"])

	// A read entry needs plugin:ro only; a write one plugin:rw.
	require.Equal(t, http.StatusAccepted, f.createRun("plugin-ro", map[string]any{"plugin_id": "echo", "entry_id": "poll"}).status)
	r = f.createRun("plugin-ro", map[string]any{"plugin_id": "echo", "entry_id": "handle"})
	requireError(t, r, http.StatusForbidden, "forbidden")
	require.Equal(t, "plugin:rw", r.body["scope"])

	requireError(t, f.do("POST", "/runs", "plugin-rw", []byte(`{not json`)), 400, "invalid_input")
	requireError(t, f.createRun("plugin-rw", map[string]any{"plugin_id": "echo"}), 400, "invalid_input")
	requireError(t, f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handle", "args": []int{1}}), 400, "invalid_input")
	requireError(t, f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handle", "mode": "later"}), 400, "invalid_input")
	requireError(t, f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handle", "idempotency_key": strings.Repeat("k", 256)}), 400, "invalid_input")
	requireError(t, f.createRun("plugin-rw", map[string]any{"plugin_id": "nosuch", "entry_id": "handle"}), 404, "not_found")
	r = f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handel"})
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["hint"], "poll, handle")
	requireError(t, f.createRun("plugin-rw", map[string]any{"plugin_id": "quiet", "entry_id": "poll"}), 409, "conflict")
	requireError(t, f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handle", "args": map[string]string{"a": strings.Repeat("a", 2000)}}),
		413, "too_large")
}

// withOther serves the fixture with a second enabled plugin, other.
func withOther(o *api.Options) {
	a := applied
	a.Plugins = append(append([]events.AppliedPlugin{}, applied.Plugins...),
		events.AppliedPlugin{Name: "other", Enabled: true, Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}})
	eng := engine.New(engine.Options{Ledger: o.Ledger, Config: config.Default(), Applied: a})
	o.Engine = func() *engine.Engine { return eng }
}

// TestCreateRunIsIdempotent: 50 concurrent identical POST /runs with one
// idempotency_key make one run: one 202, the others 200 with existing and
// the same run_id. The key with another plugin or entry is a 409
// idempotency_conflict, and makes nothing.
func TestCreateRunIsIdempotent(t *testing.T) {
	f := start(t, withOther)
	body := map[string]any{"plugin_id": "echo", "entry_id": "handle", "args": map[string]any{"n": 1}, "idempotency_key": "key-1"}
	const callers = 50
	answers := make([]response, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { answers[i] = f.createRun("plugin-rw", body) })
	}
	wg.Wait()
	// The burst may have dialed connections no request used: a server's
	// Shutdown waits 5s for such a new connection, so close them.
	http.DefaultClient.CloseIdleConnections()
	created, ids := 0, map[string]bool{}
	for _, r := range answers {
		switch r.status {
		case http.StatusAccepted:
			created++
			require.Equal(t, false, r.body["existing"])
		case http.StatusOK:
			require.Equal(t, true, r.body["existing"], string(r.raw))
		default:
			t.Fatalf("status %d: %s", r.status, r.raw)
		}
		ids[r.body["run_id"].(string)] = true
	}
	require.Equal(t, 1, created, "one run was created")
	require.Len(t, ids, 1, "every caller got its id")
	f.waitProjected()
	r := f.do("GET", "/runs?plugin_id=echo", "jobs-ro", nil)
	require.Len(t, r.body["runs"], 1, "one job")
	var id string
	for id = range ids {
	}
	require.Equal(t, "key-1", f.do("GET", "/runs/"+id, "jobs-ro", nil).body["idempotency_key"])

	for _, other := range []map[string]any{
		{"plugin_id": "other", "entry_id": "handle", "idempotency_key": "key-1"},
		{"plugin_id": "echo", "entry_id": "poll", "idempotency_key": "key-1"},
	} {
		r := f.createRun("plugin-rw", other)
		requireError(t, r, http.StatusConflict, "idempotency_conflict")
		require.Contains(t, r.body["hint"], "/runs/"+id)
	}
	f.waitProjected()
	require.Len(t, f.do("GET", "/runs", "jobs-ro", nil).body["runs"], 1, "nothing more")
}

// TestCreateRunSync: mode sync waits for the run's end and answers 200
// with its record; past api.max_sync_timeout 202 with the status then; one
// caller beyond api.max_concurrent_sync is 503 too_many_sync and nothing is
// queued.
func TestCreateRunSync(t *testing.T) {
	f := start(t, func(o *api.Options) {
		o.Settings.MaxSyncTimeout, o.Settings.MaxConcurrentSync = 10*time.Second, 1
	})
	body := map[string]any{"plugin_id": "echo", "entry_id": "handle", "mode": "sync", "task_id": "sync-task"}
	got := make(chan response, 1)
	go func() { got <- f.createRun("plugin-rw", body) }()
	id := f.waitRun("sync-task")

	// The one place is taken: another is refused, nothing queued.
	r := f.createRun("plugin-rw", map[string]any{"plugin_id": "echo", "entry_id": "handle", "mode": "sync", "task_id": "refused"})
	requireError(t, r, http.StatusServiceUnavailable, "too_many_sync")
	require.Equal(t, "1", r.header.Get("Retry-After"))

	attempt := f.startAttempt(id)
	item := f.export(id, attempt, "hello")
	f.end(id, attempt, events.OutcomeOK)
	r = <-got
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, id, r.body["run_id"])
	require.Equal(t, "succeeded", r.body["status"])
	run := r.body["run"].(map[string]any)
	require.Equal(t, "succeeded", run["status"])
	require.Equal(t, []any{item.ExportItemID}, run["result_refs"])
	f.waitProjected()
	require.Empty(t, f.do("GET", "/runs?task_id=refused", "jobs-ro", nil).body["runs"])

	// Past the wait: 202, the run goes on.
	g := start(t, func(o *api.Options) { o.Settings.MaxSyncTimeout = 50 * time.Millisecond })
	r = g.createRun("plugin-rw", body)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	require.Equal(t, "queued", r.body["status"])
	require.NotContains(t, r.body, "run")
}

// waitRun waits until the run of task is listed, and returns its id.
func (f *fixture) waitRun(task string) string {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.waitProjected()
		if runs := f.do("GET", "/runs?task_id="+task, "jobs-ro", nil).body["runs"].([]any); len(runs) > 0 {
			return runs[0].(map[string]any)["run_id"].(string)
		}
		select {
		case <-f.l.Changed():
		case <-time.After(time.Second):
		}
	}
	f.t.Fatalf("no run of task %s", task)
	return ""
}

// TestListRuns: GET /runs pages plugin runs newest first with a cursor,
// filtered by task_id, plugin_id and status.
func TestListRuns(t *testing.T) {
	f := start(t, withOther)
	var ids []string
	for i := range 5 {
		plugin := "echo"
		if i%2 == 1 {
			plugin = "other"
		}
		r := f.createRun("plugin-rw", map[string]any{"plugin_id": plugin, "entry_id": "handle", "task_id": fmt.Sprint("t", i%2)})
		require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
		ids = append(ids, r.body["run_id"].(string))
	}
	f.waitProjected()
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5)
		r := f.do("GET", "/runs?limit=2&cursor="+cursor, "jobs-ro", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		for _, run := range r.body["runs"].([]any) {
			seen = append(seen, run.(map[string]any)["run_id"].(string))
		}
		next, ok := r.body["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, seen)
	idsOf := func(query string) []string {
		r := f.do("GET", "/runs?"+query, "jobs-ro", nil)
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		var out []string
		for _, run := range r.body["runs"].([]any) {
			out = append(out, run.(map[string]any)["run_id"].(string))
		}
		return out
	}
	require.Equal(t, []string{ids[3], ids[1]}, idsOf("plugin_id=other"))
	require.Equal(t, []string{ids[4], ids[2], ids[0]}, idsOf("task_id=t0"))
	require.Len(t, idsOf("status=queued"), 5)
	require.Empty(t, idsOf("status=running"))
	requireError(t, f.do("GET", "/runs?cursor=bogus", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/runs?status=dead", "jobs-ro", nil), 400, "invalid_input")
}
