package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// fakeClock is the retention loop's clock in a test: each timer the loop
// asks for is reported on waits and fires when the test sends on fire.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	waits chan time.Duration
	fire  chan time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.waits <- d
	return c.fire
}

// TestRetentionPrunesOnlyWhenDue: the loop sleeps a minute, then an hour
// between checks; it records log.pruned only when some job's log is older
// than the retention, and the projection then holds no such log.
func TestRetentionPrunesOnlyWhenDue(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &fakeClock{t: t0, waits: make(chan time.Duration, 1), fire: make(chan time.Time)}
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL", Now: clock.now})
	require.NoError(t, err)
	defer l.Close()
	run := func(at time.Time) string {
		clock.set(at)
		res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorCLI, MaxAttempts: 1, Now: at})
		require.NoError(t, err)
		_, err = commands.StartJob(ctx, l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Now: at})
		require.NoError(t, err)
		_, err = commands.CompleteJob(ctx, l, commands.Complete{JobID: res.JobID, Attempt: 1, Now: at, Outcome: commands.Outcome{Kind: events.OutcomeOK}})
		require.NoError(t, err)
		return res.JobID
	}
	for range 3 {
		run(t0)
	}
	recent := run(t0.Add(40 * 24 * time.Hour))

	p := projections.New(l, projections.Options{})
	_, err = p.CatchUp(ctx)
	require.NoError(t, err)
	p.Start(ctx)
	defer p.Stop()

	r := &retention{ledger: l, projector: p, keep: func() time.Duration { return 30 * 24 * time.Hour }, log: slog.New(slog.DiscardHandler), now: clock.now, after: clock.after}
	r.start(ctx)
	defer r.stop()
	pruned := func() []events.LogPrunedData {
		evs, err := l.ReadStream(ctx, events.SystemStream)
		require.NoError(t, err)
		var out []events.LogPrunedData
		for _, ev := range evs {
			if ev.Type == events.LogPruned {
				var d events.LogPrunedData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				out = append(out, d)
			}
		}
		return out
	}
	// tick fires the pending timer and waits until the loop asks for the
	// next one: the check in between has run (and been projected).
	tick := func(want time.Duration) {
		clock.fire <- clock.now()
		require.Equal(t, want, <-clock.waits)
	}

	require.Equal(t, retentionFirst, <-clock.waits, "the first check is shortly after start")
	require.Empty(t, pruned(), "nothing before the first due time")

	clock.set(t0.Add(41 * 24 * time.Hour))
	tick(retentionEvery)
	got := pruned()
	require.Len(t, got, 1)
	require.Equal(t, int64(3), got[0].Jobs)
	require.Equal(t, t0.Add(11*24*time.Hour).Format(ledger.TimeFormat), got[0].Before)
	require.Equal(t, events.ActorDaemon, got[0].By)
	n, err := views.PrunableJobs(ctx, l, clock.now().Add(-r.keep()))
	require.NoError(t, err)
	require.Zero(t, n)

	tick(retentionEvery)
	tick(retentionEvery)
	require.Len(t, pruned(), 1, "no event while there is nothing to prune")

	in, err := views.Inspect(ctx, l, recent)
	require.NoError(t, err)
	require.Len(t, in.Attempts, 1, "a recent job keeps its log")

	clock.set(t0.Add(80 * 24 * time.Hour))
	tick(retentionEvery)
	got = pruned()
	require.Len(t, got, 2)
	require.Equal(t, int64(1), got[1].Jobs)
	in, err = views.Inspect(ctx, l, recent)
	require.NoError(t, err)
	require.Empty(t, in.Attempts, "its log is pruned once it is older than the retention")
	require.Equal(t, "succeeded", string(in.Job.Status), "the job itself stays")
}
