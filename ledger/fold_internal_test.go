package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// tally is a stream folded: the types of its events, oldest first.
type tally struct{ types []string }

func foldTally(t *tally, ev Event) error {
	if ev.Type == "bad" {
		return errors.New("bad event")
	}
	t.types = append(slices.Clip(t.types), ev.Type)
	return nil
}

// foldOf folds the stream in a decision of its own, and says whether the
// fold came from the cache.
func foldOf(t *testing.T, l *Ledger, stream string) ([]string, bool) {
	t.Helper()
	before := l.WriteStats()
	var got tally
	_, err := l.Decide(context.Background(), Durable, func(tx *Tx) (_ []NewEvent, err error) {
		got, err = Fold(tx, stream, foldTally)
		return nil, err
	})
	require.NoError(t, err)
	after := l.WriteStats()
	require.Equal(t, int64(1), after.FoldsCached+after.FoldsRead-before.FoldsCached-before.FoldsRead)
	return got.types, after.FoldsCached > before.FoldsCached
}

func openFoldLedger(t *testing.T, path string) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), path, Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// A decision's appends extend the fold it read: the next decision on the
// stream folds only them, with no read; a stream a decision creates is
// cached from its first events. Another append to a stream, without a
// fold, leaves its cached fold stale.
func TestFoldFollowsTheAppends(t *testing.T) {
	l := openFoldLedger(t, filepath.Join(t.TempDir(), "ductile.db"))
	ctx := context.Background()
	_, err := l.Append(ctx, NewEvent{Stream: "k/1", Type: "k.opened"})
	require.NoError(t, err)
	types, cached := foldOf(t, l, "k/1")
	require.Equal(t, []string{"k.opened"}, types)
	require.True(t, cached, "the created stream was not cached")
	for range 2 {
		_, err = l.Decide(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
			st, err := Fold(tx, "k/1", foldTally)
			if err != nil {
				return nil, err
			}
			st.types = append(st.types, "changed by the decision") // its own copy
			return []NewEvent{{Stream: "k/1", ExpectedVersion: int64(len(st.types) - 1), Type: "k.moved"}}, nil
		})
		require.NoError(t, err)
	}
	types, cached = foldOf(t, l, "k/1")
	require.Equal(t, []string{"k.opened", "k.moved", "k.moved"}, types)
	require.True(t, cached, "the appends were read back")
	types, cached = foldOf(t, l, "k/1")
	require.Equal(t, []string{"k.opened", "k.moved", "k.moved"}, types)
	require.True(t, cached, "the fold of the appends was not cached")
}

// In one batch, only the folds of decisions whose events committed are
// cached: not those of a decision that failed, nor of one whose append was
// refused.
func TestFoldIsCachedOnlyOnceCommitted(t *testing.T) {
	l := openFoldLedger(t, filepath.Join(t.TempDir(), "ductile.db"))
	ctx := context.Background()
	_, err := l.Append(ctx, NewEvent{Stream: "s/1", Type: "s.opened"}, NewEvent{Stream: "u/1", Type: "u.opened"})
	require.NoError(t, err)
	_, err = l.Append(ctx, NewEvent{Stream: "u/1", ExpectedVersion: 1, Type: "u.moved"}) // its cached fold is stale
	require.NoError(t, err)

	// Given a writer busy with a slow decision,
	entered, release := make(chan struct{}), make(chan struct{})
	blocker := l.queueDecision(ctx, Durable, func(*Tx) ([]NewEvent, error) {
		close(entered)
		<-release
		return nil, nil
	})
	<-entered
	// when three decisions queue behind it and so share one batch,
	decision := func(stream string, then func() ([]NewEvent, error)) func(tx *Tx) ([]NewEvent, error) {
		return func(tx *Tx) ([]NewEvent, error) {
			if _, err := Fold(tx, stream, foldTally); err != nil {
				return nil, err
			}
			return then()
		}
	}
	good := l.queueDecision(ctx, Durable, decision("s/1", func() ([]NewEvent, error) {
		return []NewEvent{{Stream: "s/1", ExpectedVersion: 1, Type: "s.moved"}}, nil
	}))
	refused := l.queueDecision(ctx, Durable, decision("t/1", func() ([]NewEvent, error) {
		return []NewEvent{{Stream: "t/1", Type: "t.opened"}, {Stream: "s/1", ExpectedVersion: 0, Type: "s.opened"}}, nil
	}))
	failed := l.queueDecision(ctx, Durable, decision("u/1", func() ([]NewEvent, error) { return nil, errors.New("no") }))
	close(release)
	for _, p := range []*pending{blocker, good} {
		_, err := p.wait()
		require.NoError(t, err)
	}
	_, err = refused.wait()
	require.ErrorIs(t, err, ErrVersionConflict)
	_, err = failed.wait()
	require.Error(t, err)

	// then the next decisions find only the committed one's fold.
	types, cached := foldOf(t, l, "s/1")
	require.Equal(t, []string{"s.opened", "s.moved"}, types)
	require.True(t, cached, "the committed decision's fold was not cached")
	types, cached = foldOf(t, l, "t/1")
	require.Empty(t, types, "the refused decision's first event was committed")
	require.False(t, cached, "the refused decision's fold was cached")
	types, cached = foldOf(t, l, "u/1")
	require.Equal(t, []string{"u.opened", "u.moved"}, types)
	require.False(t, cached, "the failed decision's fold was cached")
}

// A cached fold is not used once its stream moves on, whether this ledger
// (without folding it) or another process appended.
func TestFoldIsReadAgainOnceTheStreamMoves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ductile.db")
	l := openFoldLedger(t, path)
	ctx := context.Background()
	for _, s := range []string{"x/own", "x/other"} {
		_, err := l.Append(ctx, NewEvent{Stream: s, Type: "x.opened"})
		require.NoError(t, err)
		_, err = l.Append(ctx, NewEvent{Stream: s, ExpectedVersion: 1, Type: "x.moved"})
		require.NoError(t, err)
		types, cached := foldOf(t, l, s)
		require.Equal(t, []string{"x.opened", "x.moved"}, types)
		require.False(t, cached, "a fold outlived its stream's next event")
		_, cached = foldOf(t, l, s)
		require.True(t, cached, "the fold just read was not cached")
	}

	_, err := l.Append(ctx, NewEvent{Stream: "x/own", ExpectedVersion: 2, Type: "x.moved"})
	require.NoError(t, err)
	types, cached := foldOf(t, l, "x/own")
	require.Equal(t, []string{"x.opened", "x.moved", "x.moved"}, types)
	require.False(t, cached, "a fold outlived an append that did not fold it")

	other := openFoldLedger(t, path) // another process, as far as the file goes
	_, err = other.Append(ctx, NewEvent{Stream: "x/other", ExpectedVersion: 2, Type: "x.moved"})
	require.NoError(t, err)
	types, cached = foldOf(t, l, "x/other")
	require.Equal(t, []string{"x.opened", "x.moved", "x.moved"}, types)
	require.False(t, cached, "a fold outlived another process's append to its stream")
}

// A fold that fails is the decision's error, and caches nothing.
func TestFoldErrorFailsTheDecision(t *testing.T) {
	l := openFoldLedger(t, filepath.Join(t.TempDir(), "ductile.db"))
	ctx := context.Background()
	_, err := l.Append(ctx, NewEvent{Stream: "b/1", Type: "bad"})
	require.NoError(t, err)
	for range 2 {
		_, err = l.Decide(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
			_, err := Fold(tx, "b/1", foldTally)
			return nil, err
		})
		require.ErrorContains(t, err, "bad event")
	}
	require.Zero(t, l.WriteStats().FoldsCached)
}

// The cache keeps at most foldMaxEntries folds and foldMaxBytes bytes, and
// refuses a single fold bigger than a sixteenth of that.
func TestFoldCacheIsBounded(t *testing.T) {
	var c foldCache
	for i := range foldMaxEntries + 100 {
		c.keep([]stagedFold{{stream: fmt.Sprint("s", i), folded: folded{version: 1, state: i, size: 10}}})
	}
	require.Len(t, c.entries, foldMaxEntries)
	require.Equal(t, foldMaxEntries*10, c.bytes)
	_, ok := c.entries[fmt.Sprint("s", foldMaxEntries+99)]
	require.True(t, ok, "the newest fold was not kept")

	big := foldMaxBytes / 16
	for i := range 40 {
		c.keep([]stagedFold{{stream: fmt.Sprint("big", i), folded: folded{version: 1, state: i, size: big}}})
	}
	require.LessOrEqual(t, c.bytes, foldMaxBytes)
	sum := 0
	for _, f := range c.entries {
		sum += f.size
	}
	require.Equal(t, sum, c.bytes)

	c.keep([]stagedFold{{stream: "huge", folded: folded{version: 1, state: 0, size: big + 1}}})
	_, ok = c.entries["huge"]
	require.False(t, ok, "a fold over the single-fold bound was kept")
}

// A decision that starts many streams (a completion routing many children)
// leaves each one cached with its own events, in order.
func TestFoldCachesEveryStreamABigDecisionStarts(t *testing.T) {
	l := openFoldLedger(t, filepath.Join(t.TempDir(), "ductile.db"))
	var evs []NewEvent
	for i := range 20 {
		evs = append(evs, NewEvent{Stream: fmt.Sprint("c/", i), Type: "c.opened"})
	}
	for i := range 20 {
		evs = append(evs, NewEvent{Stream: fmt.Sprint("c/", i), ExpectedVersion: 1, Type: fmt.Sprint("c.moved", i)})
	}
	_, err := l.Append(context.Background(), evs...)
	require.NoError(t, err)
	for i := range 20 {
		types, cached := foldOf(t, l, fmt.Sprint("c/", i))
		require.Equal(t, []string{"c.opened", fmt.Sprint("c.moved", i)}, types)
		require.True(t, cached, "stream c/%d was read", i)
	}
}

// While the writer knows the file holds only its own writes, a cached fold
// is taken without a look at its stream's version; yet a decision still
// sees what an earlier decision of the same transaction appended to the
// stream, whose fold is cached only once committed.
func TestFoldSeesAnEarlierDecisionOfItsBatch(t *testing.T) {
	l := openFoldLedger(t, filepath.Join(t.TempDir(), "ductile.db"))
	ctx := context.Background()
	_, err := l.Append(ctx, NewEvent{Stream: "m/1", Type: "m.opened"})
	require.NoError(t, err)
	_, cached := foldOf(t, l, "m/1")
	require.True(t, cached)

	entered, release := make(chan struct{}), make(chan struct{})
	blocker := l.queueDecision(ctx, Durable, func(*Tx) ([]NewEvent, error) {
		close(entered)
		<-release
		return nil, nil
	})
	<-entered
	first := l.queueDecision(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
		st, err := Fold(tx, "m/1", foldTally)
		if err != nil {
			return nil, err
		}
		return []NewEvent{{Stream: "m/1", ExpectedVersion: int64(len(st.types)), Type: "m.moved"}}, nil
	})
	var seen tally
	second := l.queueDecision(ctx, Durable, func(tx *Tx) (_ []NewEvent, err error) {
		seen, err = Fold(tx, "m/1", foldTally)
		return nil, err
	})
	close(release)
	for _, p := range []*pending{blocker, first, second} {
		_, err := p.wait()
		require.NoError(t, err)
	}
	require.Equal(t, []string{"m.opened", "m.moved"}, seen.types)
}

// An exclusive write may append to a stream behind the cache (Import): the
// next fold of the stream looks at its version again.
func TestFoldIsReadAgainAfterAnImport(t *testing.T) {
	dir := t.TempDir()
	src := openFoldLedger(t, filepath.Join(dir, "src.db"))
	ctx := context.Background()
	for v := range int64(2) {
		_, err := src.Append(ctx, NewEvent{Stream: "i/1", ExpectedVersion: v, Type: fmt.Sprint("i.v", v+1)})
		require.NoError(t, err)
	}
	evs, err := src.ReadStream(ctx, "i/1")
	require.NoError(t, err)

	l := openFoldLedger(t, filepath.Join(dir, "copy.db"))
	require.NoError(t, l.Import(ctx, evs[:1]))
	types, _ := foldOf(t, l, "i/1")
	require.Equal(t, []string{"i.v1"}, types)
	_, cached := foldOf(t, l, "i/1")
	require.True(t, cached, "the fold just read was not cached")
	require.NoError(t, l.Import(ctx, evs[1:]))
	types, cached = foldOf(t, l, "i/1")
	require.Equal(t, []string{"i.v1", "i.v2"}, types)
	require.False(t, cached, "a fold outlived an imported event of its stream")
}
