package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLedgerReads: GET /ledger/events pages the ledger's events after a
// seq, by type and stream prefix, each page's next where the next one
// starts; GET /ledger/verify says the chain holds; both need events:ro.
func TestLedgerReads(t *testing.T) {
	f := start(t, nil)
	first, second := f.enqueue(`{}`), f.enqueue(`{"n":2}`)

	r := f.do("GET", "/ledger/events?stream_prefix=job/&type=job.enqueued&limit=1", "events-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	events := r.body["events"].([]any)
	require.Len(t, events, 1)
	ev := events[0].(map[string]any)
	require.Equal(t, "job/"+first, ev["stream"])
	require.Equal(t, "job.enqueued", ev["type"])
	require.Equal(t, ev["seq"], r.body["next"], "a full page goes on after its last event")

	r = f.do("GET", "/ledger/events?stream_prefix=job/&type=job.enqueued&after="+itoa(r.body["next"]), "events-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	events = r.body["events"].([]any)
	require.Len(t, events, 1)
	require.Equal(t, "job/"+second, events[0].(map[string]any)["stream"])
	require.Equal(t, r.body["head"], r.body["next"], "the last page ends at the head")

	r = f.do("GET", "/ledger/events?stream_prefix=nothing/", "events-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Empty(t, r.body["events"])
	require.Equal(t, r.body["head"], r.body["next"])

	requireError(t, f.do("GET", "/ledger/events?limit=0", "events-ro", nil), 400, "invalid_input")
	requireError(t, f.do("GET", "/ledger/events", "jobs-ro", nil), 403, "forbidden")
	requireError(t, f.do("GET", "/ledger/events", "", nil), 401, "unauthorized")

	r = f.do("GET", "/ledger/verify", "events-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, true, r.body["ok"], string(r.raw))
	require.Equal(t, true, r.body["chain"].(map[string]any)["ok"])
	requireError(t, f.do("GET", "/ledger/verify", "jobs-ro", nil), 403, "forbidden")
	requireError(t, f.do("GET", "/ledger/verify", "", nil), 401, "unauthorized")
}

// TestPluginCommands: GET /plugins/commands lists each loaded plugin's
// commands with their type and whether the plugin is enabled; it needs
// plugin:ro.
func TestPluginCommands(t *testing.T) {
	f := start(t, nil)
	r := f.do("GET", "/plugins/commands", "plugin-ro", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	var got []string
	for _, c := range r.body["commands"].([]any) {
		m := c.(map[string]any)
		got = append(got, m["plugin"].(string)+" "+m["command"].(string)+" "+m["type"].(string)+" "+itoa(m["enabled"]))
	}
	require.Equal(t, []string{"echo poll read true", "echo handle write true", "quiet poll read false"}, got)
	requireError(t, f.do("GET", "/plugins/commands", "jobs-ro", nil), 403, "forbidden")
	requireError(t, f.do("GET", "/plugins/commands", "", nil), 401, "unauthorized")
}

// itoa is a decoded JSON value as text (a seq: without a fraction).
func itoa(v any) string { return fmt.Sprint(v) }

// TestLedgerReadsOnABrokenLedger: a ledger that fails answers 500 with
// code error.
func TestLedgerReadsOnABrokenLedger(t *testing.T) {
	f := start(t, nil)
	f.projector.Stop()
	require.NoError(t, f.l.Close())
	requireError(t, f.do("GET", "/ledger/events", "admin", nil), 500, "error")
	requireError(t, f.do("GET", "/ledger/verify", "admin", nil), 500, "error")
	requireError(t, f.do("GET", "/runs/x/wait", "admin", nil), 500, "error")
}
