package views_test

import (
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
