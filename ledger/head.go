package ledger

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/queries"
)

// The hash chain proves the order of the events, not that none is missing
// at its end: deleting the newest events leaves a shorter chain that still
// verifies. So the head is also recorded where a truncation of the events
// table does not reach, and compared with the log:
//
//   - the head witness, a small file beside the database (WitnessPath):
//     the seq and hash of the newest event a flush of the WAL made durable,
//     written by the syncer after each successful fsync (never ahead of
//     what is durable). Several processes may write it, each its own
//     flushed head, so it may lag the log, even go back a little; what
//     holds is that the event it names is in the chain;
//   - the projector's checkpoint (migration 00009): the seq and hash of the
//     last event the projections applied, moved in the same transaction.
//
// A recorded seq past the log's head, or a recorded hash that is not the
// one of the event now at that seq, means events were removed (and perhaps
// others appended in their place). A writer refuses to open such a ledger
// unless Options.AllowDamaged says to (see checkOpen); ledger verify and
// ledger stats report it (CheckHead).

// ErrDamaged means the ledger's head does not match what was recorded of
// it, or its chain is broken past the last recorded head.
var ErrDamaged = errors.New("the ledger is damaged")

// DamagedError is what a writer's Open found wrong with the ledger.
type DamagedError struct {
	Path  string
	Check HeadCheck
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrDamaged, e.Path, e.Check.Problem)
}

func (e *DamagedError) Unwrap() error { return ErrDamaged }

// A Mark is a point of the chain recorded outside the events table.
type Mark struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash,omitempty"` // hex; empty if not recorded
	By   string `json:"recorded_by"`    // "head witness <path>" or "projector checkpoint <name>"

	hash       []byte
	checkpoint bool
}

// HeadCheck is what comparing the recorded heads with the log found.
type HeadCheck struct {
	Head     int64  `json:"head"`                // the log's newest seq
	HeadHash string `json:"head_hash,omitempty"` // hex: the hash of that event (empty: no event)
	Recorded []Mark `json:"recorded"`            // what was recorded of it
	// Verified is the seq from which the chain was verified up to Head (0:
	// the chain was not walked).
	Verified int64 `json:"verified_from,omitempty"`
	// Problem says what is wrong ("" if nothing is).
	Problem string `json:"problem,omitempty"`
	// Truncated is set when the log ends before a recorded seq: events were
	// removed from its end.
	Truncated bool `json:"truncated,omitempty"`
	// Projections is set when the projector's checkpoint does not match the
	// log: the projections were built from events the log no longer holds,
	// so they must be rebuilt.
	Projections bool `json:"projections_off_chain,omitempty"`
	// Lagging is set when the one thing wrong is that the head witness
	// names a seq past the log's head, while the projector's checkpoints
	// (kept inside the file) match it: what a copy restored from a backup
	// or a replica, older than the ledger that wrote the witness, looks
	// like (Options.AdoptRestore). Events removed behind SQLite's back
	// look the same unless they also took the checkpoint along.
	Lagging bool `json:"lagging,omitempty"`
}

// OK reports whether nothing is wrong.
func (c HeadCheck) OK() bool { return c.Problem == "" }

// WitnessPath is the head witness file of the ledger at dbPath.
func WitnessPath(dbPath string) string { return dbPath + ".head" }

// checkOpen checks the head before a writer appends anything, walking the
// chain from the last recorded head (proportional to what is new, not to
// the history). A damaged ledger is refused with a *DamagedError unless
// Options.AllowDamaged: then the damage is logged and kept for Damage, and
// the head witness, which would report it again, is removed (the next
// flush writes a new one).
func (l *Ledger) checkOpen(ctx context.Context) error {
	path := WitnessPath(l.path)
	witness, err := readWitness(path)
	if err != nil {
		l.log.Warn("ignoring an unreadable head witness", "path", path, "err", err)
	}
	var c HeadCheck
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) (err error) {
		c, err = checkHead(conn, witness, true)
		return err
	})
	if err != nil || c.OK() {
		return err
	}
	switch {
	case l.opts.AdoptRestore && c.Lagging:
		l.log.Warn("adopting a restored ledger that lags its head witness", "problem", c.Problem)
	case !l.opts.AllowDamaged:
		return &DamagedError{Path: l.path, Check: c}
	default:
		l.log.Warn("opening a damaged ledger, as allowed", "problem", c.Problem)
	}
	l.damage = &c
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the head witness: %w", err)
	}
	return nil
}

// Damage is what Open found wrong with the ledger and accepted because
// Options.AllowDamaged said to, or nil.
func (l *Ledger) Damage() *HeadCheck { return l.damage }

// CheckHead compares what was recorded of the log's head (the head witness,
// the projector's checkpoint) with the log, in one read snapshot. It does
// not walk the chain (Verify does).
func (l *Ledger) CheckHead(ctx context.Context) (HeadCheck, error) {
	witness, err := readWitness(WitnessPath(l.path))
	if err != nil {
		l.log.Warn("ignoring an unreadable head witness", "path", WitnessPath(l.path), "err", err)
	}
	var c HeadCheck
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) (err error) {
		c, err = checkHead(conn, witness, false)
		return err
	})
	return c, err
}

// checkHead checks every recorded mark against the log on conn, inside the
// caller's read transaction. With walk, it also verifies the chain from the
// highest recorded seq (all of which matched) to the head: the part of the
// log no record vouches for yet, typically a few events.
func checkHead(conn *sqlite.Conn, witness *Mark, walk bool) (HeadCheck, error) {
	head, err := readHead(conn)
	if err != nil {
		return HeadCheck{}, err
	}
	c := HeadCheck{Head: head.seq, Recorded: []Mark{}}
	if head.seq > 0 {
		c.HeadHash = hex.EncodeToString(head.hash)
	}
	if witness != nil {
		c.Recorded = append(c.Recorded, *witness)
	}
	err = queries.ListCheckpoints(conn, func(r queries.ListCheckpointsRow) error {
		if r.Seq > 0 || r.Hash != nil {
			c.Recorded = append(c.Recorded, newMark(r.Seq, r.Hash, "projector checkpoint "+r.Name, true))
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("check the ledger's head: %w", err)
	}
	anchor, err := anchorConn(conn)
	if err != nil {
		return c, fmt.Errorf("check the ledger's head: %w", err)
	}
	var from int64
	for _, m := range c.Recorded {
		problem, err := m.against(conn, head.seq, anchor)
		if err != nil {
			return c, fmt.Errorf("check the ledger's head: %w", err)
		}
		if problem != "" {
			if c.Problem == "" {
				c.Problem = problem
			}
			c.Truncated = c.Truncated || m.Seq > head.seq
			c.Projections = c.Projections || m.checkpoint
			continue
		}
		if m.hash != nil {
			from = max(from, m.Seq)
		}
	}
	c.Lagging = !c.OK() && c.Truncated && !c.Projections && witness != nil && witness.Seq > head.seq
	if !walk || !c.OK() && !c.Lagging || from == 0 || from == head.seq {
		return c, nil
	}
	if from <= anchor.seq {
		from = anchor.seq + 1 // the main file's chain starts after the archived prefix
	}
	c.Verified = from
	prev := chainHead{seq: from - 1, hash: genesis}
	if from-1 == anchor.seq {
		prev.hash = anchor.hash
	} else if from > 1 {
		if prev.hash, err = eventHash(conn, from-1); err != nil {
			return c, fmt.Errorf("check the ledger's head: %w", err)
		}
	}
	const stop = verifyStop("stop")
	err = ReadRange(conn, from-1, head.seq, func(ev Event) error {
		if problem := prev.link(ev); problem != "" {
			bad := ev.Seq
			if ev.Seq != prev.seq+1 {
				bad = prev.seq + 1
			}
			c.Problem = fmt.Sprintf("the chain breaks at seq %d, at or after the last recorded head (seq %d): %s", bad, from, problem)
			c.Lagging = false
			return stop
		}
		prev = chainHead{seq: ev.Seq, hash: ev.Hash}
		return nil
	})
	if err != nil && err != stop {
		return c, fmt.Errorf("check the ledger's head: %w", err)
	}
	return c, nil
}

// against says what is wrong with m in a log whose head is at seq head and
// whose events up to anchor were archived.
func (m Mark) against(conn *sqlite.Conn, head int64, anchor chainHead) (string, error) {
	if m.Seq > head {
		what := fmt.Sprintf("seq %d", m.Seq)
		if m.hash != nil {
			what += fmt.Sprintf(" (hash %.16s…)", m.Hash)
		}
		return fmt.Sprintf("the ledger ends at seq %d but %s was recorded by the %s: events were removed", head, what, m.By), nil
	}
	if m.hash == nil {
		return "", nil
	}
	if m.Seq < anchor.seq {
		return "", nil // archived: its archive's chain vouches for it (VerifyArchives)
	}
	found := anchor.hash
	if m.Seq > anchor.seq {
		var err error
		if found, err = eventHash(conn, m.Seq); err != nil {
			return "", err
		}
	}
	if !bytes.Equal(found, m.hash) {
		return fmt.Sprintf("the event at seq %d is not the one the %s recorded (hash %.16s… recorded, %.16s… found): "+
			"events were removed and others appended in their place, or the event was changed", m.Seq, m.By, m.Hash, hex.EncodeToString(found)), nil
	}
	return "", nil
}

func newMark(seq int64, hash []byte, by string, checkpoint bool) Mark {
	m := Mark{Seq: seq, By: by, hash: hash, checkpoint: checkpoint}
	if hash != nil {
		m.Hash = hex.EncodeToString(hash)
	}
	return m
}

// eventHash is the hash of the event at seq (nil if there is none).
func eventHash(conn *sqlite.Conn, seq int64) (hash []byte, err error) {
	err = queries.EventHash(conn, seq, func(h []byte) error { hash = h; return nil })
	return hash, err
}

// The witness file holds one line of fixed length, so a rewrite in place
// (one pwrite at offset 0) never leaves a longer line's tail behind:
// "ductile-head v1 <seq: 20 digits> <hash: 64 hex> <crc32 of the rest: 8 hex>\n".
const witnessPrefix = "ductile-head v1 "

func encodeWitness(h chainHead) []byte {
	line := fmt.Sprintf("%s%020d %x", witnessPrefix, h.seq, h.hash)
	return fmt.Appendf(nil, "%s %08x\n", line, crc32.ChecksumIEEE([]byte(line)))
}

// readWitness reads the head witness at path: nil if there is none (or
// the file is empty: created, never written yet), an error if it is not a
// witness this binary wrote (edited, or torn by a crash). A read that
// meets another process's rewrite half done is tried again.
func readWitness(path string) (m *Mark, err error) {
	for range 3 {
		if m, err = readWitnessOnce(path); err == nil {
			break
		}
	}
	return m, err
}

func readWitnessOnce(path string) (*Mark, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(b) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("%s is not a head witness", path)
	text, ok := strings.CutSuffix(string(b), "\n")
	i := strings.LastIndexByte(text, ' ')
	if !ok || i < 0 || !strings.HasPrefix(text, witnessPrefix) {
		return nil, bad
	}
	line, sum := text[:i], text[i+1:]
	if sum != fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(line))) {
		return nil, bad
	}
	fields := strings.Fields(strings.TrimPrefix(line, witnessPrefix))
	if len(fields) != 2 {
		return nil, bad
	}
	seq, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return nil, bad
	}
	hash, err := hex.DecodeString(fields[1])
	if err != nil || len(hash) != HashSize {
		return nil, bad
	}
	m := newMark(seq, hash, "head witness "+path, false)
	return &m, nil
}
