package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// memoOf reads the stream's memo in a decision of its own.
func memoOf(t *testing.T, l *Ledger, stream string) (any, bool) {
	t.Helper()
	var v any
	var ok bool
	_, err := l.Decide(context.Background(), Durable, func(tx *Tx) (_ []NewEvent, err error) {
		v, ok, err = Recall[any](tx, stream)
		return nil, err
	})
	require.NoError(t, err)
	return v, ok
}

func openMemoLedger(t *testing.T, path string) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), path, Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// In one batch, only the memos of decisions whose events committed are
// kept: not those of a decision that failed, nor of one whose append was
// refused.
func TestMemoIsKeptOnlyOnceCommitted(t *testing.T) {
	l := openMemoLedger(t, filepath.Join(t.TempDir(), "ductile.db"))
	ctx := context.Background()
	_, err := l.Append(ctx, NewEvent{Stream: "s", Type: "s.opened"})
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
	good := l.queueDecision(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
		Remember(tx, "s", 2, "good", 1)
		return []NewEvent{{Stream: "s", ExpectedVersion: 1, Type: "s.moved"}}, nil
	})
	refused := l.queueDecision(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
		Remember(tx, "t", 1, "refused", 1)
		return []NewEvent{{Stream: "t", Type: "t.opened"}, {Stream: "s", ExpectedVersion: 0, Type: "s.opened"}}, nil
	})
	failed := l.queueDecision(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
		Remember(tx, "u", 0, "failed", 1)
		return nil, errors.New("no")
	})
	close(release)
	for _, p := range []*pending{blocker, good} {
		_, err := p.wait()
		require.NoError(t, err)
	}
	_, err = refused.wait()
	require.ErrorIs(t, err, ErrVersionConflict)
	none, err := l.ReadStream(ctx, "t")
	require.NoError(t, err)
	require.Empty(t, none, "the refused decision's first event was committed")
	_, err = failed.wait()
	require.Error(t, err)

	// then the next decisions see only the committed one's memo.
	v, ok := memoOf(t, l, "s")
	require.True(t, ok)
	require.Equal(t, "good", v)
	_, ok = memoOf(t, l, "t")
	require.False(t, ok, "the refused decision's memo was kept")
	_, ok = memoOf(t, l, "u")
	require.False(t, ok, "the failed decision's memo was kept")
}

// A memo is dropped once its stream moves on, whether this ledger or
// another process appended; Forget drops it.
func TestMemoIsDroppedOnceTheStreamMoves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ductile.db")
	l := openMemoLedger(t, path)
	ctx := context.Background()
	memoize := func(stream string, version int64, v any) {
		_, err := l.Decide(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
			Remember(tx, stream, version, v, 1)
			return nil, nil
		})
		require.NoError(t, err)
	}
	for _, s := range []string{"own", "other", "forgotten"} {
		_, err := l.Append(ctx, NewEvent{Stream: s, Type: "x.opened"})
		require.NoError(t, err)
		memoize(s, 1, s+"@1")
		v, ok := memoOf(t, l, s)
		require.True(t, ok)
		require.Equal(t, s+"@1", v)
	}

	_, err := l.Append(ctx, NewEvent{Stream: "own", ExpectedVersion: 1, Type: "x.moved"})
	require.NoError(t, err)
	_, ok := memoOf(t, l, "own")
	require.False(t, ok, "a memo outlived its stream's next event")

	other := openMemoLedger(t, path) // another process, as far as the file goes
	_, err = other.Append(ctx, NewEvent{Stream: "other", ExpectedVersion: 1, Type: "x.moved"})
	require.NoError(t, err)
	_, ok = memoOf(t, l, "other")
	require.False(t, ok, "a memo outlived another process's append to its stream")

	_, err = l.Decide(ctx, Durable, func(tx *Tx) ([]NewEvent, error) {
		tx.Forget("forgotten")
		return nil, nil
	})
	require.NoError(t, err)
	_, ok = memoOf(t, l, "forgotten")
	require.False(t, ok, "Forget did not forget")
}

// The table keeps at most memoMaxEntries memos and memoMaxBytes bytes, and
// refuses a single memo bigger than a sixteenth of that.
func TestMemoTableIsBounded(t *testing.T) {
	var tab memoTable
	for i := range memoMaxEntries + 100 {
		tab.keep([]stagedMemo{{stream: fmt.Sprint("s", i), memo: memo{version: 1, value: i, size: 10}}})
	}
	require.Len(t, tab.entries, memoMaxEntries)
	require.Equal(t, memoMaxEntries*10, tab.bytes)
	_, ok := tab.get(fmt.Sprint("s", memoMaxEntries+99))
	require.True(t, ok, "the newest memo was not kept")

	big := memoMaxBytes / 16
	for i := range 40 {
		tab.keep([]stagedMemo{{stream: fmt.Sprint("big", i), memo: memo{version: 1, value: i, size: big}}})
	}
	require.LessOrEqual(t, tab.bytes, memoMaxBytes)
	sum := 0
	for _, m := range tab.entries {
		sum += m.size
	}
	require.Equal(t, sum, tab.bytes)

	tab.keep([]stagedMemo{{stream: "huge", memo: memo{version: 1, value: 0, size: big + 1}}})
	_, ok = tab.get("huge")
	require.False(t, ok, "a memo over the single-memo bound was kept")
}
