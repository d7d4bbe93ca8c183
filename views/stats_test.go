package views_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// TestReadLedgerStatsCountsAndLag: stats count the log's events by type
// and its streams, and the projector's lag until it catches up.
func TestReadLedgerStatsCountsAndLag(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 1)
	b.enqueue(t, "echo", 1)
	b.start(t, id)

	st, err := views.ReadLedgerStats(b.ctx, b.l)
	require.NoError(t, err)
	require.Equal(t, b.l.Path(), st.Database)
	require.Positive(t, st.FileBytes)
	require.Equal(t, int64(3), st.Events)
	require.Equal(t, int64(3), st.LastSeq)
	require.Equal(t, int64(2), st.Streams)
	require.Equal(t, []views.TypeCount{{events.JobEnqueued, 2}, {events.JobStarted, 1}}, st.Types)
	require.Zero(t, st.Checkpoint)
	require.Equal(t, int64(3), st.Lag)
	require.Equal(t, []string{}, st.Warnings)
	require.False(t, st.Daemon, "left to the caller")

	b.project(t)
	st, err = views.ReadLedgerStats(b.ctx, b.l)
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Checkpoint)
	require.Zero(t, st.Lag)
	require.Equal(t, []string{"events", "first_seq", "last_seq", "first_recorded_at", "last_recorded_at", "payload_bytes",
		"database", "file_bytes", "wal_bytes", "streams", "projector_checkpoint", "projector_lag", "types", "daemon_running", "warnings"},
		jsonKeys(t, st))
}
