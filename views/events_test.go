package views_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// appendEvents appends n events, alternately on streams a and b, of types
// test.even and test.odd by their number from 1.
func appendEvents(t *testing.T, b *testBundle, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		stream, typ := "a", "test.odd"
		if i%2 == 0 {
			stream, typ = "b", "test.even"
		}
		_, err := b.l.Append(b.ctx, ledger.NewEvent{Stream: stream, ExpectedVersion: ledger.AnyVersion, Type: typ,
			Data: map[string]int{"i": i}, Meta: ledger.Meta{Actor: "test"}})
		require.NoError(t, err)
	}
}

func readSeqs(t *testing.T, b *testBundle, after int64, f ledger.Filter) []int64 {
	t.Helper()
	var seqs []int64
	require.NoError(t, views.ReadEvents(b.ctx, b.l, after, f, func(ev views.Event) error { seqs = append(seqs, ev.Seq); return nil }))
	return seqs
}

// TestEventOfIsTheEventAsJSON: an event's shape has its data and meta as
// JSON, its time in the ledger's format and its hash in hex.
func TestEventOfIsTheEventAsJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	appendEvents(t, b, 1)
	evs, err := b.l.ReadStream(b.ctx, "a")
	require.NoError(t, err)
	ev := views.EventOf(evs[0])
	require.Equal(t, views.Event{Seq: 1, Stream: "a", Version: 1, Type: "test.odd", Data: evs[0].Data, Meta: evs[0].Meta,
		RecordedAt: "2030-01-01T00:00:01.000000000Z", Hash: fmt.Sprintf("%x", evs[0].Hash)}, ev)
	require.JSONEq(t, `{"i":1}`, string(ev.Data))
	require.Len(t, ev.Hash, 64)
	require.Equal(t, []string{"seq", "stream", "version", "type", "data", "meta", "recorded_at", "hash"}, jsonKeys(t, ev))
}

// TestTailStartIsBeforeTheLastN: a tail of the last n events, filtered or
// not, starts just before them; n ≤ 0 starts at the head, and more than
// there are starts before the first.
func TestTailStartIsBeforeTheLastN(t *testing.T) {
	t.Parallel()
	b := setup(t)
	appendEvents(t, b, 10)
	start := func(f ledger.Filter, n int) int64 {
		t.Helper()
		after, err := views.TailStart(b.ctx, b.l, f, n)
		require.NoError(t, err)
		return after
	}
	require.Equal(t, []int64{8, 9, 10}, readSeqs(t, b, start(ledger.Filter{}, 3), ledger.Filter{}))
	require.Equal(t, []int64{7, 9}, readSeqs(t, b, start(ledger.Filter{Stream: "a"}, 2), ledger.Filter{Stream: "a"}))
	require.Equal(t, []int64{6, 8, 10}, readSeqs(t, b, start(ledger.Filter{Type: "test.even"}, 3), ledger.Filter{Type: "test.even"}))
	require.Equal(t, int64(10), start(ledger.Filter{}, 0))
	require.Equal(t, int64(0), start(ledger.Filter{}, 50))
	require.Equal(t, int64(1), start(ledger.Filter{Stream: "b"}, 50))
	require.Equal(t, int64(10), start(ledger.Filter{Stream: "none"}, 5), "nothing matches: the head")
}

// TestFollowEventsGoesOnUntilStopped: following events gives those there
// and those appended later, filtered, until the callback stops it or the
// context ends.
func TestFollowEventsGoesOnUntilStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	appendEvents(t, b, 4)
	done := make(chan []int64, 1)
	go func() {
		var seqs []int64
		err := views.FollowEvents(b.ctx, b.l, 1, ledger.Filter{Type: "test.odd"}, func(ev views.Event) error {
			seqs = append(seqs, ev.Seq)
			if len(seqs) == 3 {
				return ledger.ErrStopFollowing
			}
			return nil
		})
		require.NoError(t, err)
		done <- seqs
	}()
	appendEvents(t, b, 4) // seqs 5..8: 5 and 7 are odd
	require.Equal(t, []int64{3, 5, 7}, <-done)

	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	err := views.FollowEvents(ctx, b.l, 8, ledger.Filter{}, func(views.Event) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
}
