package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
)

// TestGroupCommitIsolatesCallers queues ten callers behind a busy writer so
// they land in one batch, and checks that the three bad ones fail alone.
func TestGroupCommitIsolatesCallers(t *testing.T) {
	var tick atomic.Int64 // each batch reads the clock once: one time per batch
	base := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	l, err := Open(context.Background(), filepath.Join(t.TempDir(), "ductile.db"), Options{
		Synchronous: "NORMAL",
		Now:         func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) },
	})
	require.NoError(t, err)
	defer l.Close()
	ctx := context.Background()
	_, err = l.Append(ctx, NewEvent{Stream: "acct/x", Type: "acct.opened"})
	require.NoError(t, err)

	// Given a writer busy with a slow decision,
	release, blocked := busyWriter(t, l)

	// when eleven callers queue up behind it, four of them bad (one of those
	// with a good event before its bad one),
	boom := errors.New("decision failed")
	calls := []func() ([]int64, error){}
	for i := range 7 {
		calls = append(calls, func() ([]int64, error) {
			return l.Append(ctx,
				NewEvent{Stream: fmt.Sprintf("good/%d", i), Type: "good.first"},
				NewEvent{Stream: fmt.Sprintf("good/%d", i), ExpectedVersion: 1, Type: "good.second"})
		})
	}
	calls = append(calls,
		func() ([]int64, error) { return l.Append(ctx, NewEvent{Stream: "acct/x", Type: "acct.opened"}) }, // conflict
		func() ([]int64, error) {
			return l.Append(ctx, NewEvent{Stream: "bad/json", Type: "x.y", Data: json.RawMessage("{")})
		},
		func() ([]int64, error) {
			return l.Decide(ctx, Durable, func(*Tx) ([]NewEvent, error) { return nil, boom })
		},
		func() ([]int64, error) {
			return l.Append(ctx,
				NewEvent{Stream: "half/1", Type: "half.first"},
				NewEvent{Stream: "acct/x", ExpectedVersion: 0, Type: "acct.opened"}) // conflict
		},
	)
	type result struct {
		seqs []int64
		err  error
	}
	results := make([]result, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs, err := call()
			results[i] = result{seqs, err}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(l.reqs) < len(calls) {
		require.True(t, time.Now().Before(deadline), "callers never queued")
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	require.NoError(t, <-blocked)

	// then the good ones are in, the bad ones failed with their own error,
	for i := range 7 {
		require.NoError(t, results[i].err)
		require.Len(t, results[i].seqs, 2)
	}
	require.ErrorIs(t, results[7].err, ErrVersionConflict)
	require.ErrorIs(t, results[8].err, ErrInvalidEvent)
	require.ErrorIs(t, results[9].err, boom)
	require.ErrorIs(t, results[10].err, ErrVersionConflict)
	half, err := l.ReadStream(ctx, "half/1")
	require.NoError(t, err)
	require.Empty(t, half, "a refused request's earlier event was committed")

	// and all the good ones were committed in a single transaction.
	batchTimes := map[time.Time]int{}
	for i := range 7 {
		events, err := l.ReadStream(ctx, fmt.Sprintf("good/%d", i))
		require.NoError(t, err)
		require.Len(t, events, 2)
		batchTimes[events[0].RecordedAt]++
	}
	require.Len(t, batchTimes, 1, "the queued callers shared one commit")
	res, err := l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.Equal(t, int64(1+1+14), res.Events)
}

// A flush requested by a commit with nothing to flush (a projection write is
// relaxed but appends nothing) must not keep later relaxed appends from
// asking for theirs: once that request comes due, the next relaxed commit
// asks anew and is flushed.
func TestRelaxedAppendAfterAProjectionWriteIsFlushed(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), Options{})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Append(ctx, NewEvent{Stream: "s/1", Type: "t.happened"})
	require.NoError(t, err)
	require.NoError(t, l.WriteProjections(ctx, func(*sqlite.Conn) error { return nil }))

	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), what)
			time.Sleep(time.Millisecond)
		}
	}
	waitUntil("the projection write's flush request never came due", func() bool { return !l.syncer.lazyDue.Load() })
	before := l.WriteStats().Syncs
	_, err = l.Decide(ctx, Relaxed, func(*Tx) ([]NewEvent, error) {
		return []NewEvent{{Stream: "s/2", Type: "t.happened"}}, nil
	})
	require.NoError(t, err)
	waitUntil("the relaxed append was never flushed", func() bool { return l.WriteStats().Syncs > before })
}

// DecideEach queues its decisions back to back: behind a busy writer they
// share one transaction, land in order, and a failing one fails alone.
func TestDecideEachSharesOneCommit(t *testing.T) {
	l, err := Open(context.Background(), filepath.Join(t.TempDir(), "ductile.db"), Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	ctx := context.Background()

	// Given a writer busy with a slow decision,
	release, blocked := busyWriter(t, l)
	before := l.WriteStats().Commits

	// when three decisions are queued together, the second failing,
	boom := errors.New("no")
	type answer struct {
		seqs [][]int64
		errs []error
	}
	answered := make(chan answer, 1)
	go func() {
		seqs, errs := l.DecideEach(ctx, Relaxed,
			func(*Tx) ([]NewEvent, error) { return []NewEvent{{Stream: "a", Type: "a.done"}}, nil },
			func(*Tx) ([]NewEvent, error) { return nil, boom },
			func(*Tx) ([]NewEvent, error) { return []NewEvent{{Stream: "c", Type: "c.done"}}, nil },
		)
		answered <- answer{seqs, errs}
	}()
	require.Eventually(t, func() bool { return len(l.reqs) == 3 }, 10*time.Second, time.Millisecond, "the three decisions are queued")
	release()
	require.NoError(t, <-blocked)
	a := <-answered

	// then the blocker's commit and theirs are the only two,
	require.Equal(t, before+2, l.WriteStats().Commits, "the three decisions shared one commit")
	// and each is answered alone, in the order given.
	require.NoError(t, a.errs[0])
	require.ErrorIs(t, a.errs[1], boom)
	require.NoError(t, a.errs[2])
	require.Equal(t, [][]int64{{2}, nil, {3}}, a.seqs)
}

// busyWriter keeps l's writer in a slow decision until release is called:
// decisions queued meanwhile land in one batch after it. blocked answers the
// slow decision.
func busyWriter(t *testing.T, l *Ledger) (release func(), blocked <-chan error) {
	t.Helper()
	entered, released := make(chan struct{}), make(chan struct{})
	answer := make(chan error, 1)
	go func() {
		_, err := l.Decide(context.Background(), Durable, func(*Tx) ([]NewEvent, error) {
			close(entered)
			<-released
			return []NewEvent{{Stream: "blocker", Type: "blocker.done"}}, nil
		})
		answer <- err
	}()
	<-entered
	return func() { close(released) }, answer
}
