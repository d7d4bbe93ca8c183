package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
)

// TestReadStreamThroughSkipsOutput: a stream as it stood at a seq, without
// its job.stderr_written (output no fold reads), and one version by a
// point read.
func TestReadStreamThroughSkipsOutput(t *testing.T) {
	ctx := context.Background()
	b := setup(t, ledger.Options{})
	_, err := b.l.Append(ctx,
		ledger.NewEvent{Stream: "job/x", ExpectedVersion: 0, Type: "job.enqueued", Data: map[string]any{"job_id": "x"}},
		ledger.NewEvent{Stream: "job/x", ExpectedVersion: 1, Type: "job.started", Data: map[string]any{"attempt": 1}},
		ledger.NewEvent{Stream: "job/x", ExpectedVersion: 2, Type: "job.stderr_written", Data: map[string]any{"attempt": 1}},
		ledger.NewEvent{Stream: "job/x", ExpectedVersion: 3, Type: "job.succeeded", Data: map[string]any{"attempt": 1}})
	require.NoError(t, err)
	var types []string
	require.NoError(t, b.l.Read(ctx, func(conn *sqlite.Conn) error {
		evs, err := ledger.ReadStreamThrough(conn, "job/x", 3)
		for _, ev := range evs {
			types = append(types, ev.Type)
		}
		return err
	}))
	require.Equal(t, []string{"job.enqueued", "job.started"}, types, "through seq 3, its stderr left out")

	ev, ok, err := b.l.ReadStreamVersion(ctx, "job/x", 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "job.enqueued", ev.Type)
	_, ok, err = b.l.ReadStreamVersion(ctx, "job/y", 1)
	require.NoError(t, err)
	require.False(t, ok)
}
