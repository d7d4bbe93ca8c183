package ledger

import (
	"context"
	"fmt"
	"math"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/queries"
)

// eventFromRow converts a row of any of the events queries (they all select
// the same columns, so their row types convert to ReadStreamRow).
// A recorded_at that does not parse (only possible if the file was edited)
// reads as the zero time; Verify reports such an event by its hash.
func eventFromRow(r queries.ReadStreamRow) Event {
	at, _ := time.Parse(TimeFormat, r.RecordedAt)
	return Event{
		Seq:        r.Seq,
		Stream:     r.Stream,
		Version:    r.Version,
		Type:       r.Type,
		Data:       []byte(r.Data),
		Meta:       []byte(r.Meta),
		RecordedAt: at,
		PrevHash:   r.PrevHash,
		Hash:       r.Hash,
		recordedAt: r.RecordedAt,
	}
}

func readStream(conn *sqlite.Conn, stream string) ([]Event, error) {
	var out []Event
	err := queries.ReadStream(conn, stream, func(r queries.ReadStreamRow) error {
		out = append(out, eventFromRow(r))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return out, nil
}

// LastEvent returns a stream's newest event, and false if it has none.
func (l *Ledger) LastEvent(ctx context.Context, stream string) (ev Event, ok bool, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamLast(conn, stream, func(r queries.ReadStreamLastRow) error {
			ev, ok = eventFromRow(queries.ReadStreamRow(r)), true
			return nil
		})
	})
	if err != nil {
		return Event{}, false, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return ev, ok, nil
}

// ReadStream returns a stream's events, oldest first (none if it is empty).
func (l *Ledger) ReadStream(ctx context.Context, stream string) (events []Event, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		events, err = readStream(conn, stream)
		return err
	})
	return events, err
}

// Filter narrows ReadFrom to one event type and/or one stream.
type Filter struct {
	Type   string
	Stream string
}

// ReadFrom calls fn for up to limit events with seq > after, oldest first,
// and returns the seq of the last one it passed (after, if none). A limit ≤ 0
// means 1000.
func (l *Ledger) ReadFrom(ctx context.Context, after int64, limit int, f Filter, fn func(Event) error) (last int64, err error) {
	if limit <= 0 {
		limit = 1000
	}
	last = after
	visit := func(r queries.ReadStreamRow) error {
		ev := eventFromRow(r)
		last = ev.Seq
		return fn(ev)
	}
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		if f == (Filter{}) {
			return queries.ReadRange(conn, queries.ReadRangeParams{AfterSeq: after, UntilSeq: math.MaxInt64, MaxEvents: int64(limit)},
				func(r queries.ReadRangeRow) error { return visit(queries.ReadStreamRow(r)) })
		}
		if f.Stream != "" {
			return queries.ReadStreamAfter(conn, queries.ReadStreamAfterParams{Stream: f.Stream, AfterSeq: after, Type: f.Type, MaxEvents: int64(limit)},
				func(r queries.ReadStreamAfterRow) error { return visit(queries.ReadStreamRow(r)) })
		}
		return queries.ReadFromFiltered(conn, queries.ReadFromFilteredParams{AfterSeq: after, Type: f.Type, Stream: f.Stream, MaxEvents: int64(limit)},
			func(r queries.ReadFromFilteredRow) error { return visit(queries.ReadStreamRow(r)) })
	})
	if err != nil {
		return last, fmt.Errorf("read events after %d: %w", after, err)
	}
	return last, nil
}

// ReadRange calls fn for every event with after < seq <= until on conn, in
// pages, oldest first. It is how the projector and replay walk the log.
func ReadRange(conn *sqlite.Conn, after, until int64, fn func(Event) error) error {
	const page = 2048
	for after < until {
		n := 0
		err := queries.ReadRange(conn, queries.ReadRangeParams{AfterSeq: after, UntilSeq: until, MaxEvents: page},
			func(r queries.ReadRangeRow) error {
				ev := eventFromRow(queries.ReadStreamRow(r))
				n++
				after = ev.Seq
				return fn(ev)
			})
		if err != nil {
			return err
		}
		if n < page {
			return nil
		}
	}
	return nil
}

// LastSeq reads the newest seq in the file (0 if empty), including other
// processes' appends.
func (l *Ledger) LastSeq(ctx context.Context) (seq int64, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		seq, err = queries.MaxSeq(conn)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read last seq: %w", err)
	}
	return seq, nil
}

func (l *Ledger) loadHead(ctx context.Context) error {
	var head chainHead
	err := l.Read(ctx, func(conn *sqlite.Conn) (err error) {
		head, err = readHead(conn)
		return err
	})
	if err != nil {
		return err
	}
	l.committed.Store(&head)
	l.notify.committed(head.seq)
	return nil
}

// Stats summarises the log.
type Stats struct {
	Events          int64  `json:"events"`
	FirstSeq        int64  `json:"first_seq"`
	LastSeq         int64  `json:"last_seq"`
	FirstRecordedAt string `json:"first_recorded_at,omitempty"`
	LastRecordedAt  string `json:"last_recorded_at,omitempty"`
	PayloadBytes    int64  `json:"payload_bytes"`
}

// StatsConn reads a summary of the log on conn, inside whatever
// transaction the caller holds (so it can be read with other things of the
// same moment).
func StatsConn(conn *sqlite.Conn) (Stats, error) {
	r, err := queries.LedgerStats(conn)
	if err != nil {
		return Stats{}, fmt.Errorf("ledger stats: %w", err)
	}
	return Stats(r), nil
}
