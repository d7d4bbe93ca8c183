package ledger

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/queries"
)

// Archiving moves the log's oldest events, a prefix seq <= N, verbatim to an
// archive file beside the ledger, then deletes them from the ledger in the
// transaction that records the archive (ledger_archives, migration 00014)
// and appends the event naming it. The main file's chain then continues
// from the archive's last event (the anchor). docs/architecture.md,
// "Archiving a prefix of the log", gives the reasoning. This file holds the
// archive's types and the move itself; archive_plan.go decides what moves,
// archive_write.go writes the file, archive_read.go reads the log across
// archive files and archive_verify.go checks them.

// Archive is one archive file as the ledger records it.
type Archive struct {
	File        string `json:"file"` // base name, in the ledger's directory
	FirstSeq    int64  `json:"first_seq"`
	LastSeq     int64  `json:"last_seq"`
	Events      int64  `json:"events"`
	PrevHash    string `json:"prev_hash"`    // hex: the hash of event FirstSeq-1 (zeros: none)
	LastHash    string `json:"last_hash"`    // hex: the hash of event LastSeq
	ContentHash string `json:"content_hash"` // hex: BLAKE3 of the file's bytes
	ArchivedAt  string `json:"archived_at"`
}

// MissingArchiveError means an archive file the ledger records is not
// where it should be.
type MissingArchiveError struct {
	Path              string
	FirstSeq, LastSeq int64
}

func (e *MissingArchiveError) Error() string {
	return fmt.Sprintf("the archive of events %d..%d is missing: %s (put the file back beside the ledger)", e.FirstSeq, e.LastSeq, e.Path)
}

// ErrArchiveRaced means the ledger changed between planning an archive and
// recording it (another archive, or an event that makes the cut unsafe):
// nothing was deleted; run it again.
var ErrArchiveRaced = errors.New("the ledger changed while archiving: nothing was deleted, run it again")

// ArchivePath is the archive file of events first..last of the ledger at dbPath.
func ArchivePath(dbPath string, first, last int64) string {
	return fmt.Sprintf("%s.archive-%012d-%012d", dbPath, first, last)
}

// ArchiveOptions say what to archive and how.
type ArchiveOptions struct {
	// Before: only events recorded before this time move.
	Before time.Time
	// Cut lowers a proposed last seq to one whose removal leaves every
	// stream a decision reads whole either entirely archived or entirely
	// present, and says why it lowered it ("" if it did not). It runs when
	// planning and again inside the transaction that deletes, where it
	// must not lower the cut further (else ErrArchiveRaced).
	Cut func(conn *sqlite.Conn, through int64) (int64, string, error)
	// Event builds the event recording the archive, appended in the
	// transaction that deletes the archived events.
	Event func(a Archive) NewEvent
	// ForgetVersionsOf are stream name prefixes whose streams' versions
	// need not be kept once archived (streams archived whole, never
	// appended to again: "job/", "run/"). Other streams go on counting from their archived
	// version, and their newest archived event of each type is carried in
	// the main file (archived_stream_types), where Tx.LastEvent,
	// ReadStreamLast and ReadStreamLastOfType find it.
	ForgetVersionsOf []string
	// Progress, if set, is called while the archive file is written with the
	// events copied so far and the total.
	Progress func(copied, total int64)
	// AfterFileWritten, if set, is called once the archive file is in place
	// and before anything is deleted: a fault point for crash tests.
	AfterFileWritten func(path string) error
}

// Archive moves the events the plan picks to a new archive file: it writes
// and flushes the file first, then deletes the events and appends
// opts.Event in one transaction. A crash before that commit leaves the
// ledger as it was (and perhaps an archive file it does not name, which a
// rerun replaces); after it, archived. It returns the plan and the archive
// (zero if nothing was to move).
func (l *Ledger) Archive(ctx context.Context, opts ArchiveOptions) (ArchivePlan, Archive, error) {
	if l.opts.ReadOnly {
		return ArchivePlan{}, Archive{}, ErrReadOnly
	}
	if opts.Event == nil {
		return ArchivePlan{}, Archive{}, errors.New("archive: no event to record it with")
	}
	plan, err := l.PlanArchive(ctx, opts)
	if err != nil || plan.Events == 0 {
		return plan, Archive{}, err
	}
	a, err := l.writeArchive(ctx, plan, opts.Progress)
	if err != nil {
		return plan, Archive{}, err
	}
	if opts.AfterFileWritten != nil {
		if err := opts.AfterFileWritten(plan.File); err != nil {
			return plan, Archive{}, err
		}
	}
	if err := l.recordArchive(ctx, plan, a, opts); err != nil {
		os.Remove(plan.File) // the ledger does not name it: nothing was deleted
		return plan, Archive{}, err
	}
	return plan, a, nil
}

// recordArchive deletes the archived events and records the archive, in
// one transaction of the writer.
func (l *Ledger) recordArchive(ctx context.Context, plan ArchivePlan, a Archive, opts ArchiveOptions) error {
	prevHash, _ := hex.DecodeString(a.PrevHash)
	lastHash, _ := hex.DecodeString(a.LastHash)
	contentHash, _ := hex.DecodeString(a.ContentHash)
	r := &request{ctx: ctx, done: make(chan struct{})}
	r.exclusive = func(conn *sqlite.Conn) error {
		anchor, err := anchorConn(conn)
		if err != nil {
			return err
		}
		if anchor.seq != plan.Anchor {
			return ErrArchiveRaced
		}
		if opts.Cut != nil {
			cut, why, err := opts.Cut(conn, plan.Through)
			if err != nil {
				return err
			}
			if cut != plan.Through {
				return fmt.Errorf("%w (%s)", ErrArchiveRaced, why)
			}
		}
		head, err := readHead(conn)
		if err != nil {
			return err
		}
		err = queries.InsertArchive(conn, queries.InsertArchiveParams{
			FirstSeq: a.FirstSeq, LastSeq: a.LastSeq, File: a.File, PrevHash: prevHash, LastHash: lastHash,
			ContentHash: contentHash, Events: a.Events, ArchivedAt: a.ArchivedAt,
		})
		if err != nil {
			return fmt.Errorf("archive: record: %w", err)
		}
		forget, err := json.Marshal(append([]string{}, opts.ForgetVersionsOf...))
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		err = queries.KeepArchivedVersions(conn, queries.KeepArchivedVersionsParams{AfterSeq: plan.Anchor, UntilSeq: plan.Through, SkipPrefixes: string(forget)})
		if err != nil {
			return fmt.Errorf("archive: keep stream versions: %w", err)
		}
		err = queries.CarryArchivedEvents(conn, queries.CarryArchivedEventsParams{AfterSeq: plan.Anchor, UntilSeq: plan.Through, SkipPrefixes: string(forget)})
		if err != nil {
			return fmt.Errorf("archive: carry each stream's newest events: %w", err)
		}
		if err := queries.DeleteEventsThrough(conn, plan.Through); err != nil {
			return fmt.Errorf("archive: delete the archived events: %w", err)
		}
		// Versions of job and run streams may be forgotten: no cached
		// fold may outlive them.
		l.folds.clear()
		tx := &Tx{conn: conn, folds: &l.folds}
		next, _, err := insertEvent(tx, head, opts.Event(a), l.opts.Now().UTC().Format(TimeFormat))
		if err != nil {
			return fmt.Errorf("archive: append its event: %w", err)
		}
		r.seqs, r.newHead = []int64{next.seq}, &next
		return nil
	}
	if err := l.submit(r); err != nil {
		return err
	}
	return r.err
}

// Archives lists the archive files the ledger records, oldest first.
func (l *Ledger) Archives(ctx context.Context) (out []Archive, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) (err error) {
		out, err = archivesConn(conn)
		return err
	})
	return out, err
}

func archivesConn(conn *sqlite.Conn) ([]Archive, error) {
	out := []Archive{}
	err := queries.ListArchives(conn, func(r queries.ListArchivesRow) error {
		out = append(out, Archive{
			File: r.File, FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, Events: r.Events,
			PrevHash: hex.EncodeToString(r.PrevHash), LastHash: hex.EncodeToString(r.LastHash),
			ContentHash: hex.EncodeToString(r.ContentHash), ArchivedAt: r.ArchivedAt,
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list archives: %w", err)
	}
	return out, nil
}

// anchorConn is the last archived event (seq 0 and the genesis hash if
// nothing was archived): where the main file's chain continues from.
func anchorConn(conn *sqlite.Conn) (chainHead, error) {
	anchor := chainHead{hash: genesis}
	err := queries.ArchiveAnchor(conn, func(r queries.ArchiveAnchorRow) error {
		anchor = chainHead{seq: r.LastSeq, hash: r.LastHash}
		return nil
	})
	if err != nil {
		return anchor, fmt.Errorf("read the archive anchor: %w", err)
	}
	return anchor, nil
}
