package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// TestPluginReads: GET /plugin/{plugin} shows a plugin as loaded with its
// state, totals and newest jobs, and GET /plugin/{plugin}/logs the log
// lines of its jobs (spec §11.6 status and logs), each with its scope;
// POST /plugin/{plugin}/logs is still an enqueue of the command "logs".
func TestPluginReads(t *testing.T) {
	f := start(t, nil)
	ctx := context.Background()
	id := f.enqueue(`{}`)
	_, err := commands.StartJob(ctx, f.l, commands.Start{JobID: id, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	require.NoError(t, commands.RecordStderr(ctx, f.l, commands.StderrLines{JobID: id, Attempt: 1, Line: 1,
		Lines: []events.StderrLine{{At: commands.Time(time.Now()), Text: "working"}}}))
	_, err = commands.CompleteJob(ctx, f.l, commands.Complete{JobID: id, Attempt: 1, Now: time.Now(), Outcome: commands.Outcome{
		Kind: events.OutcomeOK, Stderr: "working\ndone\n", Response: json.RawMessage(`{"status":"ok","state_updates":{"seen":1}}`),
		StateUpdates: json.RawMessage(`{"seen":1}`)}})
	require.NoError(t, err)
	f.waitProjected()

	r := f.do("GET", "/plugin/echo", "admin", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "echo", r.body["name"])
	require.Equal(t, "echo", r.body["plugin"].(map[string]any)["name"])
	require.Equal(t, map[string]any{"seen": float64(1)}, r.body["state"])
	require.Equal(t, map[string]any{"succeeded": float64(1)}, r.body["totals"])
	jobs := r.body["jobs"].([]any)
	require.Len(t, jobs, 1)
	require.Equal(t, id, jobs[0].(map[string]any)["job_id"])

	// Its jobs need jobs:ro too; without them, plugin:ro will do.
	requireError(t, f.do("GET", "/plugin/echo", "plugin-ro", nil), 403, "forbidden")
	r = f.do("GET", "/plugin/echo?jobs=0", "plugin-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Empty(t, r.body["jobs"])
	requireError(t, f.do("GET", "/plugin/echo", "jobs-ro", nil), 403, "forbidden")
	requireError(t, f.do("GET", "/plugin/echo", "", nil), 401, "unauthorized")
	requireError(t, f.do("GET", "/plugin/echo?jobs=-1", "admin", nil), 400, "invalid_input")
	r = f.do("GET", "/plugin/ecoh", "admin", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["message"], `did you mean "echo"`)
	r = f.do("GET", "/plugin/broken", "admin", nil)
	require.Equal(t, http.StatusOK, r.status, "skipped, but known: %s", r.raw)
	require.Equal(t, "manifest: bad", r.body["skipped"])
	require.Nil(t, r.body["plugin"])

	r = f.do("GET", "/plugin/echo/logs", "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	lines := r.body["lines"].([]any)
	require.Len(t, lines, 2)
	first, second := lines[0].(map[string]any), lines[1].(map[string]any)
	require.Equal(t, []any{id, "working", id, "done"}, []any{first["job_id"], first["message"], second["job_id"], second["message"]})
	r = f.do("GET", "/plugin/echo/logs?after="+jsonNumber(second["seq"]), "jobs-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Empty(t, r.body["lines"], "nothing after the last line")
	r = f.do("GET", "/plugin/echo/logs?lines=1", "jobs-ro", nil)
	require.Len(t, r.body["lines"], 1)
	requireError(t, f.do("GET", "/plugin/echo/logs", "plugin-ro", nil), 403, "forbidden")
	requireError(t, f.do("GET", "/plugin/echo/logs", "", nil), 401, "unauthorized")
	requireError(t, f.do("GET", "/plugin/echo/logs?lines=0", "jobs-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/plugin/nosuch/logs", "jobs-ro", nil), 404, "not_found")

	// The enqueue route still takes a command named logs.
	r = f.do("POST", "/plugin/echo/logs", "plugin-rw", nil)
	requireError(t, r, 404, "not_found")
	require.Contains(t, r.body["message"], `plugin "echo" has no command "logs"`)

	f.projector.Stop()
	require.NoError(t, f.l.Close())
	requireError(t, f.do("GET", "/plugin/echo", "admin", nil), 500, "error")
	requireError(t, f.do("GET", "/plugin/echo/logs", "admin", nil), 500, "error")
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
