package dispatch_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
)

// syncBuffer is a log destination the daemon's goroutines may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records are the JSON log records written so far.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(line, &rec), "%s", line)
		out = append(out, rec)
	}
	return out
}

// TestPluginStderrIsLoggedAtInfo: what a plugin writes to stderr is its
// own ordinary output, logged at INFO; WARN and ERROR are kept for
// Ductile's own problems (issue 20, item 9).
func TestPluginStderrIsLoggedAtInfo(t *testing.T) {
	var logs syncBuffer
	b := setupWith(t, 1, nil, daemon.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	res, err := commands.EnqueueJob(b.ctx, b.d.Ledger, commands.JobFor(b.d.Config(), "chatty", "poll", events.ActorCLI))
	require.NoError(t, err)
	b.waitFor(map[string]string{res.JobID: "succeeded"})

	var found []map[string]any
	for _, rec := range logs.records(t) {
		if rec["msg"] == "plugin wrote to stderr" {
			found = append(found, rec)
		}
	}
	require.Len(t, found, 1, "the plugin's stderr is logged once")
	require.Equal(t, "INFO", found[0]["level"])
	require.Contains(t, found[0]["stderr"], "an ordinary line")
}
