package ledger_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/ledger"
)

// TestWriteHealth: while SQLite really fails the writes (another process
// holds the write lock past the busy timeout), the ledger says its writes
// are failing, since the first failure; a refused decision changes
// nothing; the next write that succeeds ends it.
func TestWriteHealth(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var minutes atomic.Int64 // the writer reads the clock
	now := func() time.Time { return start.Add(time.Duration(minutes.Load()) * time.Minute) }
	b := setup(t, ledger.Options{BusyTimeout: 20 * time.Millisecond, Now: now, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	_, err := b.l.Append(ctx, ev("job/1", 0, "job.enqueued", nil))
	require.NoError(t, err)
	require.Equal(t, ledger.WriteHealth{}, b.l.WriteHealth())

	// A conflict is the caller's: the disk is fine.
	_, err = b.l.Append(ctx, ev("job/1", 0, "job.enqueued", nil))
	require.ErrorIs(t, err, ledger.ErrVersionConflict)
	require.False(t, b.l.WriteHealth().Failing)

	intruder := rawConn(t, b.path)
	end, err := sqlitex.ImmediateTransaction(intruder) // holds the write lock
	require.NoError(t, err)
	first := now()
	for i := range 2 {
		_, err = b.l.Append(ctx, ev("job/2", ledger.AnyVersion, "job.enqueued", nil))
		require.Error(t, err)
		h := b.l.WriteHealth()
		require.True(t, h.Failing, "%+v", h)
		require.Equal(t, first, h.Since, "since the first failure")
		require.Contains(t, h.LastError, "database is locked")
		require.Equal(t, int64(i+1), h.Failures)
		minutes.Add(1)
	}
	end(&err) // err is set: the intruder rolls back
	_, err = b.l.Append(ctx, ev("job/2", ledger.AnyVersion, "job.enqueued", nil))
	require.NoError(t, err)
	require.Equal(t, ledger.WriteHealth{}, b.l.WriteHealth())
}
