package projections_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// TestReplayAfterPruningIsExact interleaves log.pruned events with random
// job lifecycles (cutoffs in the past and, as an operator may give one, a
// little in the future), projects them incrementally in odd batches, then
// rebuilds from scratch: the dumps are byte-identical, and Compare finds no
// mismatch, so ledger verify still matches after pruning.
func TestReplayAfterPruningIsExact(t *testing.T) {
	total := int64(30_000)
	if testing.Short() {
		total = 5_000
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	var mu sync.Mutex
	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clock
	}
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL", Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second) // one second per transaction
		return clock
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	p := projections.New(l, projections.Options{BatchSize: 777})

	prune := func(before time.Time) {
		_, err := l.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion, Type: events.LogPruned,
			Data: events.LogPrunedData{Before: before.UTC().Format(ledger.TimeFormat), By: "test"}, Meta: ledger.Meta{Actor: "test"}})
		require.NoError(t, err)
	}
	prunes, calls := 0, 0
	generate(t, l, rng, total, func() {
		// Every 15th step, so that even a short run prunes several times.
		if calls++; calls%15 == 0 {
			prunes++
			prune(now().Add(time.Duration(rng.IntN(600)-400) * time.Second))
		}
		for range rng.IntN(3) {
			_, err := p.RunOnce(ctx)
			require.NoError(t, err)
		}
	})
	last := now().Add(-100 * time.Second)
	prune(last)
	catchUp(t, p)
	require.Greater(t, prunes, 5)

	// Pruning pruned: no job terminal before the last cutoff keeps its log,
	// and newer jobs keep theirs.
	var prunable, logged, terminal int64
	require.NoError(t, l.Read(ctx, func(conn *sqlite.Conn) error {
		var err error
		prunable, err = queries.CountPrunableJobs(conn, last.UTC().Format(ledger.TimeFormat))
		if err != nil {
			return err
		}
		return sqlitex.ExecuteTransient(conn, `SELECT (SELECT count(DISTINCT job_id) FROM job_log),
			(SELECT count(*) FROM job_queue WHERE status IN ('succeeded', 'dead', 'canceled') AND started_at IS NOT NULL)`,
			&sqlitex.ExecOptions{ResultFunc: func(stmt *sqlite.Stmt) error {
				logged, terminal = stmt.ColumnInt64(0), stmt.ColumnInt64(1)
				return nil
			}})
	}))
	require.Zero(t, prunable)
	require.Positive(t, logged, "recent jobs keep their logs")
	require.Greater(t, terminal, logged, "older jobs' logs were pruned")

	incremental, cp := dump(t, l)
	_, err = projections.Rebuild(ctx, l, 0)
	require.NoError(t, err)
	replayed, cp2 := dump(t, l)
	require.Equal(t, cp, cp2)
	require.True(t, bytes.Equal(incremental, replayed), "replay after pruning differs from the live projections")

	mismatch, err := projections.Compare(ctx, l, openLedger(t, "scratch.db"), nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)

	// One event at a time (pages of one) leaves the same rows as pages do.
	single := openLedger(t, "single.db")
	_, err = projections.CopyLog(ctx, l, single, 0, nil)
	require.NoError(t, err)
	catchUp(t, projections.New(single, projections.Options{BatchSize: 1}))
	one, cp3 := dump(t, single)
	require.Equal(t, cp, cp3)
	require.True(t, bytes.Equal(incremental, one), "event by event differs from pages")
}
