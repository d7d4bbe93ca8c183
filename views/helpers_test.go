package views_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// now is the clock every command in these tests runs at.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type testBundle struct {
	ctx context.Context
	l   *ledger.Ledger
}

// setup opens a ledger on a real file in a temp dir. Its recorded_at clock
// advances one second per transaction.
func setup(t *testing.T) *testBundle {
	t.Helper()
	var mu sync.Mutex
	tick := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{
		Synchronous: "NORMAL",
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			tick = tick.Add(time.Second)
			return tick
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return &testBundle{ctx: context.Background(), l: l}
}

// enqueue enqueues a job of plugin (command poll) with at most
// maxAttempts attempts, and an id if one is given.
func (b *testBundle) enqueue(t *testing.T, plugin string, maxAttempts int, id ...string) string {
	t.Helper()
	cmd := commands.Enqueue{Plugin: plugin, Command: "poll", SubmittedBy: events.ActorCLI, MaxAttempts: maxAttempts,
		BackoffBase: time.Second, Now: now}
	if len(id) > 0 {
		cmd.JobID = id[0]
	}
	res, err := commands.EnqueueJob(b.ctx, b.l, cmd)
	require.NoError(t, err)
	return res.JobID
}

// start starts the job's next attempt, an hour after now: any retry is due.
func (b *testBundle) start(t *testing.T, id string) {
	t.Helper()
	_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: now.Add(time.Hour)})
	require.NoError(t, err)
}

func (b *testBundle) complete(t *testing.T, id string, attempt int, out commands.Outcome, children ...commands.Enqueue) {
	t.Helper()
	_, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: id, Attempt: attempt, Outcome: out, Children: children, Now: now})
	require.NoError(t, err)
}

func (b *testBundle) cancel(t *testing.T, id, reason string) {
	t.Helper()
	_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: id, Reason: reason, Actor: events.ActorCLI, Now: now})
	require.NoError(t, err)
}

func (b *testBundle) stderr(t *testing.T, id string, attempt, line int, texts ...string) {
	t.Helper()
	cmd := commands.StderrLines{JobID: id, Attempt: attempt, Line: line}
	for i, text := range texts {
		cmd.Lines = append(cmd.Lines, stderrLine(i, text))
	}
	require.NoError(t, commands.RecordStderr(b.ctx, b.l, cmd))
}

// project brings the projections up to date, as a daemon's projector would.
func (b *testBundle) project(t *testing.T) {
	t.Helper()
	_, err := projections.New(b.l, projections.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).CatchUp(b.ctx)
	require.NoError(t, err)
}

var ok = commands.Outcome{Kind: events.OutcomeOK, Duration: 40 * time.Millisecond, Response: json.RawMessage(`{"status":"ok"}`)}

// failed is a retryable failure with stderr.
func failed(stderr string) commands.Outcome {
	return commands.Outcome{Kind: events.OutcomeError, Retryable: true, Error: "boom", ExitCode: 1, Stderr: stderr}
}

// jsonKeys returns the keys of the JSON object v marshals to, in order.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var value json.RawMessage
		require.NoError(t, dec.Decode(&value))
	}
	return keys
}

// stderrLine is the i-th line of a batch of stderr, read i ms after now.
func stderrLine(i int, text string) events.StderrLine {
	return events.StderrLine{At: commands.Time(now.Add(time.Duration(i) * time.Millisecond)), Text: text}
}
