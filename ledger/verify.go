package ledger

import (
	"bytes"
	"context"
	"fmt"

	"zombiezen.com/go/sqlite"
)

// VerifyResult is what Verify found. OK is false when BadSeq names the first
// event whose place in the hash chain does not hold.
type VerifyResult struct {
	OK      bool   `json:"ok"`
	Events  int64  `json:"events"`
	LastSeq int64  `json:"last_seq"`
	BadSeq  int64  `json:"bad_seq,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// Verify walks the whole hash chain in one read snapshot: every event must
// follow the previous seq without a gap, carry the previous event's hash, and
// hash to what it stores. progress, if not nil, is called every 10,000 events.
func (l *Ledger) Verify(ctx context.Context, progress func(checked int64)) (VerifyResult, error) {
	var res VerifyResult
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		var err error
		res, err = VerifyConn(ctx, conn, progress)
		return err
	})
	return res, err
}

// VerifyConn is Verify on a given connection.
func VerifyConn(ctx context.Context, conn *sqlite.Conn, progress func(checked int64)) (VerifyResult, error) {
	res := VerifyResult{OK: true}
	prev := chainHead{seq: 0, hash: genesis}
	fail := func(seq int64, format string, args ...any) {
		res.OK, res.BadSeq, res.Problem = false, seq, fmt.Sprintf(format, args...)
	}
	const stop = verifyStop("stop")
	err := ReadRange(conn, 0, 1<<62, func(ev Event) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case ev.Seq != prev.seq+1:
			fail(prev.seq+1, "event %d is missing (the next event is %d)", prev.seq+1, ev.Seq)
		case !bytes.Equal(ev.PrevHash, prev.hash):
			fail(ev.Seq, "prev_hash does not match the hash of event %d", prev.seq)
		default:
			want := chainHash(prev.hash, ev.Seq, ev.Stream, ev.Version, ev.Type, string(ev.Data), string(ev.Meta), ev.recordedAt)
			if !bytes.Equal(want, ev.Hash) {
				fail(ev.Seq, "content does not match its hash: the event was changed after it was written")
			}
		}
		if !res.OK {
			return stop
		}
		res.Events++
		res.LastSeq = ev.Seq
		prev = chainHead{seq: ev.Seq, hash: ev.Hash}
		if progress != nil && res.Events%10000 == 0 {
			progress(res.Events)
		}
		return nil
	})
	if err != nil && err != stop {
		return res, fmt.Errorf("verify ledger: %w", err)
	}
	return res, nil
}

type verifyStop string

func (e verifyStop) Error() string { return string(e) }
