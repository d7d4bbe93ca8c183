package dispatch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/projections"
)

// A worker freed while the candidate cache is cut at its read limit, and
// every cached job is held back by a running one (the same dedupe key),
// must not leave the loop asleep: a job past the cut may be startable now,
// and the exit's other wake-up (its outcome reaching the projector) may be
// spent before the loop listens. fill wakes the loop so that it reads the
// queue again; it used to wait for the running job to end, however long
// that took.
func TestFillOnAStaleTruncatedCacheWakesTheLoopToReadAgain(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	d := New(Options{Engine: engine.New(engine.Options{Ledger: l, Config: config.Default(), Plugins: &pluginhost.Registry{}}),
		Projector: projections.New(l, projections.Options{}), MaxWorkers: 2})

	// One worker runs a job with key k; the other was just freed. The
	// cache, read while both were busy, is truncated and holds only jobs
	// with key k, and nothing the projector applied since calls for a read.
	holder := candidate{id: "holder", plugin: "p", command: "poll", dedupeKey: "k", seq: 1}
	d.mu.Lock()
	d.claimLocked(holder)
	d.queue = queue{
		ready:     []candidate{{id: "held", plugin: "p", command: "poll", dedupeKey: "k", seq: 2}},
		truncated: true, cappedSeen: d.slots.cappedPlugins(nil),
	}
	d.mu.Unlock()

	_, err = d.fill(ctx)
	require.NoError(t, err)
	require.Len(t, d.woken, 1, "the loop is woken to read past the cut")
	require.True(t, d.queue.runDry)
	require.Equal(t, 1, d.slots.inUse, "the held-back job did not start")

	// That wake-up reads the queue (here empty: nothing past the cut), and a
	// fresh read that finds nothing startable does not wake the loop again.
	<-d.woken
	_, err = d.fill(ctx)
	require.NoError(t, err)
	require.Empty(t, d.woken)
	require.False(t, d.queue.truncated)
	d.workers.Done() // the holder's claim; no worker runs it
}
