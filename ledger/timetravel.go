package ledger

import (
	"context"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/queries"
)

// SeqAt is the last seq recorded at or before t in conn's main file: the
// log as it stood at t. It bisects the seqs through the primary key (about
// 2·log2 of the log's length probes, no scan and no index on the time):
// recorded_at rises with seq, since one writer stamps each commit with the
// clock. If the clock was ever set back, the result is still a seq whose
// event was recorded at or before t and whose successor was recorded after
// it. A t before the main file's first event gives that event's seq - 1:
// the archive boundary (ArchivedThrough), or 0 when nothing was archived.
func SeqAt(conn *sqlite.Conn, t time.Time) (int64, error) {
	bounds, err := queries.SeqBounds(conn)
	if err != nil {
		return 0, fmt.Errorf("seq at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	if bounds.LastSeq == 0 {
		return 0, nil
	}
	// lo was recorded at or before t (or is the virtual seq before the
	// first), hi after it (or is the virtual seq after the last).
	lo, hi := bounds.FirstSeq-1, bounds.LastSeq+1
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		at, err := recordedAt(conn, mid)
		if err != nil {
			return 0, fmt.Errorf("seq at %s: %w", t.Format(time.RFC3339Nano), err)
		}
		if at.After(t) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo, nil
}

// RecordedAt is when the event seq of conn's main file was recorded.
func RecordedAt(conn *sqlite.Conn, seq int64) (time.Time, error) { return recordedAt(conn, seq) }

func recordedAt(conn *sqlite.Conn, seq int64) (time.Time, error) {
	found, text := false, ""
	if err := queries.EventRecordedAt(conn, seq, func(s string) error { found, text = true, s; return nil }); err != nil {
		return time.Time{}, err
	}
	if !found {
		return time.Time{}, fmt.Errorf("no event %d in the main file", seq)
	}
	return time.Parse(TimeFormat, text)
}

// ArchivedThrough is the newest seq an archive holds (0: none): the events
// up to it are no longer in conn's main file.
func ArchivedThrough(conn *sqlite.Conn) (int64, error) {
	anchor, err := anchorConn(conn)
	return anchor.seq, err
}

// ReadStreamThrough is a stream's events with seq <= until, oldest first,
// read through UNIQUE (stream, version): the stream as it stood at until,
// without its job.stderr_written (output no fold reads).
func ReadStreamThrough(conn *sqlite.Conn, stream string, until int64) ([]Event, error) {
	var out []Event
	err := queries.ReadStreamThrough(conn, queries.ReadStreamThroughParams{Stream: stream, UntilSeq: until},
		func(r queries.ReadStreamThroughRow) error {
			out = append(out, eventFromRow(queries.ReadStreamRow(r)))
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read stream %s through seq %d: %w", stream, until, err)
	}
	return out, nil
}

// ReadStreamVersion is one event of a stream, by version (ok false: none).
func (l *Ledger) ReadStreamVersion(ctx context.Context, stream string, version int64) (ev Event, ok bool, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamVersion(conn, queries.ReadStreamVersionParams{Stream: stream, Version: version},
			func(r queries.ReadStreamVersionRow) error {
				ev, ok = eventFromRow(queries.ReadStreamRow(r)), true
				return nil
			})
	})
	if err != nil {
		return Event{}, false, fmt.Errorf("read %s v%d: %w", stream, version, err)
	}
	return ev, ok, nil
}
