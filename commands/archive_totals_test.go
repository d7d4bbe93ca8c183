package commands_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/views"
)

// jobTotals reads job_totals as "plugin/status" → n.
func jobTotals(t *testing.T, ctx context.Context, l *ledger.Ledger) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	require.NoError(t, l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ListJobTotals(conn, func(r queries.ListJobTotalsRow) error {
			out[r.Plugin+"/"+r.Status] = r.N
			return nil
		})
	}))
	return out
}

// TestArchiveKeepsJobTotals: ledger archive removes the archived jobs'
// rows from job_queue but not what job_totals counted of them, and a
// replay (which reads the archive first) gives the same totals, equal to
// the live projections as ledger verify compares them.
func TestArchiveKeepsJobTotals(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := setupCarry(t, t0)
	for day := range 6 {
		at := t0.Add(time.Duration(day+1) * 24 * time.Hour)
		b.set(at)
		b.runJob(t, "", events.ActorCLI, day%3 != 0, at) // 4 succeed, 2 dead
	}
	at := t0.Add(10 * 24 * time.Hour)
	b.set(at)
	res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorCLI, MaxAttempts: 1, BackoffBase: time.Second, Now: at})
	require.NoError(t, err)
	_, err = commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: res.JobID, Reason: "test", Actor: events.ActorCLI, Now: at})
	require.NoError(t, err)
	b.waitProjected(t)
	want := map[string]int64{"echo/succeeded": 4, "echo/dead": 2, "echo/canceled": 1}
	require.Equal(t, want, jobTotals(t, b.ctx, b.l))

	// Archive the first five days (three succeeded and two dead jobs).
	b.set(t0.Add(365 * 24 * time.Hour))
	plan, _, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: t0.Add(5*24*time.Hour + time.Hour)}.Run(b.ctx, b.l)
	require.NoError(t, err)
	require.Equal(t, int64(5), plan.JobStreams)
	b.waitProjected(t)
	var rows int64
	require.NoError(t, b.l.Read(b.ctx, func(conn *sqlite.Conn) error {
		return queries.CountJobsByPluginAndStatus(conn, func(r queries.CountJobsByPluginAndStatusRow) error { rows += r.Jobs; return nil })
	}))
	require.Equal(t, int64(1), rows, "the archived dead jobs left job_queue; the canceled one stays")
	require.Equal(t, want, jobTotals(t, b.ctx, b.l), "archiving does not lower the totals")

	// A replay reads the archive first and counts the same.
	mismatch, err := projections.Compare(b.ctx, b.l, openScratch(t), nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)
	_, err = projections.Rebuild(b.ctx, b.l, 0)
	require.NoError(t, err)
	require.Equal(t, want, jobTotals(t, b.ctx, b.l))
}

func openScratch(t *testing.T) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "scratch.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}
