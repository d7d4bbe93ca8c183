package projections

import (
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// Streams keeps one row per stream: its version, first and last seq, and
// the type of its latest event.
type Streams struct{}

func (Streams) Name() string { return "streams" }

func (Streams) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return queries.UpsertStream(conn, queries.UpsertStreamParams{
		Stream:     ev.Stream,
		Version:    ev.Version,
		Seq:        ev.Seq,
		Type:       ev.Type,
		RecordedAt: ev.RecordedAtText(),
	})
}

func (Streams) Reset(conn *sqlite.Conn) error { return queries.DeleteStreams(conn) }

func (Streams) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpStreams(conn, func(r queries.DumpStreamsRow) error { return dumpRow(w, r) })
}

// EventCounts keeps one row per event type: how many, first and last seq.
type EventCounts struct{}

func (EventCounts) Name() string { return "event_counts" }

func (EventCounts) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return queries.UpsertEventCount(conn, queries.UpsertEventCountParams{Type: ev.Type, Seq: ev.Seq})
}

func (EventCounts) Reset(conn *sqlite.Conn) error { return queries.DeleteEventCounts(conn) }

func (EventCounts) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpEventCounts(conn, func(r queries.DumpEventCountsRow) error { return dumpRow(w, r) })
}
