package topicworker_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/topicworker"
	"github.com/ductile/ductile/views"
)

// testBundle is an Engine on a real ledger with its projector running.
type testBundle struct {
	ctx context.Context
	l   *ledger.Ledger
	eng *engine.Engine
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	p := projections.New(l, projections.Options{Logger: slog.New(slog.DiscardHandler)})
	p.Start(ctx)
	t.Cleanup(func() {
		p.Stop()
		require.NoError(t, l.Close())
	})
	cfg := config.Default()
	cfg.Topics = map[string]config.TopicConfig{"t": {MaxAttempts: 5, Backoff: 50 * time.Millisecond}}
	return &testBundle{ctx: ctx, l: l, eng: engine.New(engine.Options{Ledger: l, Config: cfg})}
}

func (b *testBundle) publish(t *testing.T, body string) events.Message {
	t.Helper()
	m, err := b.eng.Publish(b.ctx, engine.Publish{Topic: "t", Body: body, Producer: "test"})
	require.NoError(t, err)
	return m
}

func (b *testBundle) replies(t *testing.T, topic string) []views.MessageRecord {
	t.Helper()
	page, err := views.ReadMessages(b.ctx, b.l, views.MessageFilter{Topic: topic, Limit: 1000})
	require.NoError(t, err)
	return page.Messages
}

func options(ex topicworker.Exchange, name string, script string) topicworker.Options {
	return topicworker.Options{Exchange: ex, Topics: topicworker.Topics{Topic: "t", Success: "t.ok", Failure: "t.bad"},
		Worker: name, Lease: time.Second, ClaimWait: 200 * time.Millisecond, Command: sh(script)}
}

func TestWorkerOnceReplies(t *testing.T) {
	b := setup(t)
	m := b.publish(t, "hi")
	o := options(b.eng, "w1", `echo "got $(cat)"`)
	o.Once = true
	w, err := topicworker.New(o)
	require.NoError(t, err)
	require.NoError(t, w.Run(b.ctx))
	handled, failed, dropped := w.Snapshot()
	require.Equal(t, [3]int64{1, 0, 0}, [3]int64{handled, failed, dropped})
	require.Eventually(t, func() bool { return len(b.replies(t, "t.ok")) == 1 }, 5*time.Second, 10*time.Millisecond)
	r := b.replies(t, "t.ok")[0]
	require.Equal(t, "got hi\n", r.Body)
	require.Equal(t, m.ID, r.ParentID)
}

// lazyRenewer is an exchange whose renewals do nothing: the lease runs
// out while the command runs.
type lazyRenewer struct {
	topicworker.Exchange
}

func (x *lazyRenewer) RenewMessage(context.Context, string, engine.MessageFence, time.Duration) (time.Time, error) {
	return time.Now(), nil
}

// TestWorkerDropsAStaleFinish: a worker whose lease ran out (another
// worker claimed the message and replied) has its finish refused as stale:
// it drops the message, never retries, and one follow-up stands.
func TestWorkerDropsAStaleFinish(t *testing.T) {
	b := setup(t)
	b.publish(t, "race")
	slow := &lazyRenewer{Exchange: b.eng}
	started := filepath.Join(t.TempDir(), "started")
	o := options(slow, "slow", `touch `+started+`; sleep 2.5; echo late`)
	o.Once = true
	w1, err := topicworker.New(o)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w1.Run(ctx) }()
	require.Eventually(t, func() bool { return fileExists(started) }, 5*time.Second, 5*time.Millisecond)
	// The second worker claims once the first lease and the backoff passed.
	o2 := options(b.eng, "fast", `echo fast`)
	o2.Once = true
	w2, err := topicworker.New(o2)
	require.NoError(t, err)
	require.NoError(t, w2.Run(ctx))
	require.ErrorIs(t, <-done, topicworker.ErrNoMessage)
	_, _, dropped := w1.Snapshot()
	require.EqualValues(t, 1, dropped)
	require.Eventually(t, func() bool { return len(b.replies(t, "t.ok")) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "fast\n", b.replies(t, "t.ok")[0].Body)
}

// TestWorkerStopsOnAnInvalidClaim: a claim the exchange refuses as
// invalid (a lease out of bounds) ends the worker with the error instead
// of being retried for ever.
func TestWorkerStopsOnAnInvalidClaim(t *testing.T) {
	b := setup(t)
	o := options(b.eng, "w", `true`)
	o.Lease = 300 * time.Millisecond
	w, err := topicworker.New(o)
	require.NoError(t, err)
	require.ErrorContains(t, w.Run(b.ctx), "1s to 1h")
}

// TestWorkerStopsWithinItsGrace: when the worker is told to stop, a
// running command that ends within the grace still gets its reply; one
// past it is killed and the message left to its lease.
func TestWorkerStopsWithinItsGrace(t *testing.T) {
	b := setup(t)
	b.publish(t, "quick")
	started := filepath.Join(t.TempDir(), "started")
	o := options(b.eng, "w", `touch `+started+`; sleep 0.3; echo finished`)
	o.ShutdownGrace = 5 * time.Second
	w, err := topicworker.New(o)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	require.Eventually(t, func() bool { return fileExists(started) }, 5*time.Second, 5*time.Millisecond)
	stop()
	require.NoError(t, <-done)
	handled, _, _ := w.Snapshot()
	require.EqualValues(t, 1, handled, "the running command finished within the grace and replied")

	b.publish(t, "long")
	started2 := filepath.Join(t.TempDir(), "started")
	o = options(b.eng, "w2", `touch `+started2+`; sleep 30`)
	o.ShutdownGrace = 100 * time.Millisecond
	w, err = topicworker.New(o)
	require.NoError(t, err)
	ctx, stop = context.WithCancel(b.ctx)
	go func() { done <- w.Run(ctx) }()
	require.Eventually(t, func() bool { return fileExists(started2) }, 5*time.Second, 5*time.Millisecond)
	began := time.Now()
	stop()
	require.NoError(t, <-done)
	require.Less(t, time.Since(began), 3*time.Second, "killed after the grace, not after the command's 30 s")
	_, _, dropped := w.Snapshot()
	require.EqualValues(t, 1, dropped)
	require.Len(t, b.replies(t, "t.ok"), 1, "no reply for the killed command")
}
