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
	OK      bool  `json:"ok"`
	Events  int64 `json:"events"`
	LastSeq int64 `json:"last_seq"`
	BadSeq  int64 `json:"bad_seq,omitempty"`
	// ArchivedThrough is the last archived seq (0: none): the walk starts
	// after it, from the hash the newest archive ends with.
	ArchivedThrough int64  `json:"archived_through,omitempty"`
	Problem         string `json:"problem,omitempty"`
}

// Verify walks the main file's hash chain in one read snapshot, from the
// newest archive's last event if a prefix was archived (VerifyArchives
// checks the archives): every event must follow the previous seq without a
// gap, carry the previous event's hash, and hash to what it stores. progress, if not nil, is called every 10,000 events.
func (l *Ledger) Verify(ctx context.Context, progress func(checked int64)) (VerifyResult, error) {
	var res VerifyResult
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		var err error
		res, err = verifyConn(ctx, conn, progress)
		return err
	})
	return res, err
}

// verifyConn is Verify on a given connection, inside its read transaction.
func verifyConn(ctx context.Context, conn *sqlite.Conn, progress func(checked int64)) (VerifyResult, error) {
	res := VerifyResult{OK: true}
	prev, err := anchorConn(conn)
	if err != nil {
		return res, fmt.Errorf("verify ledger: %w", err)
	}
	res.ArchivedThrough = prev.seq
	const stop = verifyStop("stop")
	err = ReadRange(conn, prev.seq, 1<<62, func(ev Event) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if problem := prev.link(ev); problem != "" {
			bad := ev.Seq
			if ev.Seq != prev.seq+1 {
				bad = prev.seq + 1 // the missing one
			}
			res.OK, res.BadSeq, res.Problem = false, bad, problem
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

// link reports what keeps ev from continuing the chain at h ("" if nothing
// does): it must be the next seq, carry h's hash as its prev_hash, and hash
// to what it stores.
func (h chainHead) link(ev Event) string {
	switch {
	case ev.Seq != h.seq+1:
		return fmt.Sprintf("event %d is missing (the next event is %d)", h.seq+1, ev.Seq)
	case !bytes.Equal(ev.PrevHash, h.hash):
		return fmt.Sprintf("prev_hash does not match the hash of event %d", h.seq)
	case !bytes.Equal(chainHash(h.hash, ev.Seq, ev.Stream, ev.Version, ev.Type, string(ev.Data), string(ev.Meta), ev.recordedAt), ev.Hash):
		return "content does not match its hash: the event was changed after it was written"
	}
	return ""
}

type verifyStop string

func (e verifyStop) Error() string { return string(e) }
