package ledger

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/zeebo/blake3"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/queries"
)

// Archiving moves the log's oldest events, a prefix seq <= N, verbatim to an
// archive file beside the ledger, then deletes them from the ledger in the
// transaction that records the archive (ledger_archives, migration 00014)
// and appends the event naming it. The main file's chain then continues
// from the archive's last event (the anchor). docs/architecture.md,
// "Archiving a prefix of the log", gives the reasoning.

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

// ArchivePlan is what an archive would move.
type ArchivePlan struct {
	Before     string `json:"before"`
	Head       int64  `json:"head"`              // the log's newest seq
	Anchor     int64  `json:"anchor"`            // the newest seq already archived (0: none)
	Candidate  int64  `json:"candidate"`         // the last seq such that it and every earlier event were recorded before Before
	Through    int64  `json:"through"`           // the last seq that moves (Anchor: nothing moves)
	Lowered    string `json:"lowered,omitempty"` // why Through is below Candidate
	Events     int64  `json:"events"`
	JobStreams int64  `json:"jobs"`
	Bytes      int64  `json:"bytes"` // about what the events hold
	File       string `json:"file,omitempty"`
}

// PlanArchive says what Archive would move, without moving anything.
func (l *Ledger) PlanArchive(ctx context.Context, opts ArchiveOptions) (ArchivePlan, error) {
	var plan ArchivePlan
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) (err error) {
		plan, err = planArchive(conn, l.path, opts)
		return err
	})
	return plan, err
}

func planArchive(conn *sqlite.Conn, dbPath string, opts ArchiveOptions) (ArchivePlan, error) {
	plan := ArchivePlan{Before: opts.Before.UTC().Format(TimeFormat)}
	anchor, err := anchorConn(conn)
	if err != nil {
		return plan, err
	}
	head, err := readHead(conn)
	if err != nil {
		return plan, err
	}
	plan.Head, plan.Anchor, plan.Through = head.seq, anchor.seq, anchor.seq
	first, err := queries.FirstSeqAtOrAfter(conn, plan.Before)
	if err != nil {
		return plan, fmt.Errorf("plan archive: %w", err)
	}
	plan.Candidate = head.seq
	if first > 0 {
		plan.Candidate = first - 1
	}
	through := plan.Candidate
	// The projections must have applied what moves: the projector reads
	// only the main file.
	err = queries.ListCheckpoints(conn, func(r queries.ListCheckpointsRow) error {
		if r.Seq < through {
			through = r.Seq
			plan.Lowered = fmt.Sprintf("the projections have applied events up to seq %d only (start the daemon to let them catch up)", r.Seq)
		}
		return nil
	})
	if err != nil {
		return plan, fmt.Errorf("plan archive: %w", err)
	}
	if opts.Cut != nil && through > anchor.seq {
		cut, why, err := opts.Cut(conn, through)
		if err != nil {
			return plan, fmt.Errorf("plan archive: %w", err)
		}
		if cut < through {
			through, plan.Lowered = cut, why
		}
	}
	if through <= anchor.seq {
		return plan, nil
	}
	plan.Through = through
	size, err := queries.RangeSize(conn, queries.RangeSizeParams{AfterSeq: anchor.seq, UntilSeq: through})
	if err != nil {
		return plan, fmt.Errorf("plan archive: %w", err)
	}
	plan.Events, plan.Bytes, plan.JobStreams = size.Events, size.Bytes, size.JobStreams
	plan.File = ArchivePath(dbPath, anchor.seq+1, through)
	return plan, nil
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

// archiveSchema is the schema of an archive file: the events as the ledger
// stored them, and what the archive is.
const archiveSchema = `
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY,
    stream      TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL,
    meta        TEXT    NOT NULL,
    recorded_at TEXT    NOT NULL,
    prev_hash   BLOB    NOT NULL,
    hash        BLOB    NOT NULL
) STRICT;
CREATE TABLE archive (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
`

// writeArchive copies the planned events into a new file beside the
// ledger, checking their chain from the anchor, flushes it and renames it
// into place; it returns the archive as the ledger will record it.
func (l *Ledger) writeArchive(ctx context.Context, plan ArchivePlan, progress func(copied, total int64)) (a Archive, err error) {
	dir := filepath.Dir(plan.File)
	f, err := os.CreateTemp(dir, "."+filepath.Base(plan.File)+".tmp-*")
	if err != nil {
		return a, fmt.Errorf("archive: %w", err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			os.Remove(tmp)
			os.Remove(tmp + "-journal")
		}
	}()
	out, err := sqlite.OpenConn(tmp, sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		return a, fmt.Errorf("archive: %w", err)
	}
	var last chainHead
	err = func() (err error) {
		defer func() {
			if cerr := out.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		for _, p := range []string{"PRAGMA journal_mode = DELETE;", "PRAGMA synchronous = FULL;"} {
			if err := sqlitex.ExecuteTransient(out, p, nil); err != nil {
				return err
			}
		}
		if err := sqlitex.ExecuteScript(out, archiveSchema, nil); err != nil {
			return err
		}
		end, err := sqlitex.ImmediateTransaction(out)
		if err != nil {
			return err
		}
		defer end(&err)
		insert := out.Prep(`INSERT INTO events (seq, stream, version, type, data, meta, recorded_at, prev_hash, hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);`)
		err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
			anchor, err := anchorConn(conn)
			if err != nil {
				return err
			}
			if anchor.seq != plan.Anchor {
				return ErrArchiveRaced
			}
			last = anchor
			var copied int64
			return ReadRange(conn, anchor.seq, plan.Through, func(ev Event) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				if problem := last.link(ev); problem != "" {
					return fmt.Errorf("event %d: %s (run ductile ledger verify)", ev.Seq, problem)
				}
				insert.BindInt64(1, ev.Seq)
				insert.BindText(2, ev.Stream)
				insert.BindInt64(3, ev.Version)
				insert.BindText(4, ev.Type)
				insert.BindText(5, string(ev.Data))
				insert.BindText(6, string(ev.Meta))
				insert.BindText(7, ev.recordedAt)
				insert.BindBytes(8, ev.PrevHash)
				insert.BindBytes(9, ev.Hash)
				if _, err := insert.Step(); err != nil {
					return err
				}
				if err := insert.Reset(); err != nil {
					return err
				}
				last = chainHead{seq: ev.Seq, hash: ev.Hash}
				copied++
				if progress != nil && (copied%10000 == 0 || copied == plan.Events) {
					progress(copied, plan.Events)
				}
				return nil
			})
		})
		if err != nil {
			return err
		}
		if last.seq != plan.Through {
			return fmt.Errorf("copied events up to seq %d, not %d", last.seq, plan.Through)
		}
		info := map[string]string{
			"format": "ductile.archive.v1", "ledger": filepath.Base(l.path),
			"first_seq": fmt.Sprint(plan.Anchor + 1), "last_seq": fmt.Sprint(plan.Through),
			"last_hash": hex.EncodeToString(last.hash),
		}
		for k, v := range info {
			if err := sqlitex.Execute(out, "INSERT INTO archive (key, value) VALUES (?, ?);", &sqlitex.ExecOptions{Args: []any{k, v}}); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return a, fmt.Errorf("archive: write %s: %w", tmp, err)
	}
	if err := syncFile(tmp); err != nil {
		return a, fmt.Errorf("archive: %w", err)
	}
	sum, err := fileHash(tmp)
	if err != nil {
		return a, fmt.Errorf("archive: %w", err)
	}
	// A file of this name the ledger does not name is what a crash left
	// before its archive was recorded: this one replaces it.
	if err := os.Rename(tmp, plan.File); err != nil {
		return a, fmt.Errorf("archive: %w", err)
	}
	if err := syncFile(dir); err != nil {
		return a, fmt.Errorf("archive: %w", err)
	}
	prev := genesis
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		if plan.Anchor > 0 {
			anchor, err := anchorConn(conn)
			prev = anchor.hash
			return err
		}
		return nil
	})
	if err != nil {
		return a, err
	}
	return Archive{
		File: filepath.Base(plan.File), FirstSeq: plan.Anchor + 1, LastSeq: plan.Through, Events: plan.Through - plan.Anchor,
		PrevHash: hex.EncodeToString(prev), LastHash: hex.EncodeToString(last.hash), ContentHash: hex.EncodeToString(sum),
		ArchivedAt: l.opts.Now().UTC().Format(TimeFormat),
	}, nil
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

// ReadLog calls fn for every event with after < seq <= until, oldest first,
// reading those archived from their archive files (a missing one fails
// with a *MissingArchiveError) and the rest from conn's ledger. It is how
// a replay walks the whole log.
func ReadLog(conn *sqlite.Conn, after, until int64, fn func(Event) error) error {
	anchor, err := anchorConn(conn)
	if err != nil {
		return err
	}
	if after < anchor.seq && after < until {
		dir, err := ledgerDir(conn)
		if err != nil {
			return err
		}
		archives, err := archivesConn(conn)
		if err != nil {
			return err
		}
		for _, a := range archives {
			if a.LastSeq <= after || after >= until {
				continue
			}
			to := min(until, a.LastSeq)
			if err := readArchive(filepath.Join(dir, a.File), a, after, to, fn); err != nil {
				return err
			}
			after = to
		}
	}
	return ReadRange(conn, after, until, fn)
}

// ReadLogFrom is ReadLog on a connection of the pool, for up to limit
// events after after; it returns the last seq it passed.
func (l *Ledger) ReadLogFrom(ctx context.Context, after int64, limit int, fn func(Event) error) (last int64, err error) {
	last = after
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		return ReadLog(conn, after, after+int64(limit), func(ev Event) error {
			last = ev.Seq
			return fn(ev)
		})
	})
	return last, err
}

// ledgerDir is the directory of conn's main database file.
func ledgerDir(conn *sqlite.Conn) (string, error) {
	var file string
	err := sqlitex.Execute(conn, "SELECT file FROM pragma_database_list WHERE name = 'main';", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { file = stmt.ColumnText(0); return nil },
	})
	if err != nil || file == "" {
		return "", fmt.Errorf("find the ledger's directory: %v", err)
	}
	return filepath.Dir(file), nil
}

// readArchive calls fn for the events after < seq <= until of the archive
// file at path.
func readArchive(path string, a Archive, after, until int64, fn func(Event) error) error {
	conn, err := openArchive(path, a)
	if err != nil {
		return err
	}
	defer conn.Close()
	stmt := conn.Prep(`SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
		FROM events WHERE seq > ? AND seq <= ? ORDER BY seq;`)
	stmt.BindInt64(1, after)
	stmt.BindInt64(2, until)
	defer stmt.Reset()
	for {
		row, err := stmt.Step()
		if err != nil {
			return fmt.Errorf("read archive %s: %w", path, err)
		}
		if !row {
			return nil
		}
		ev := eventFromRow(queries.ReadStreamRow{
			Seq: stmt.ColumnInt64(0), Stream: stmt.ColumnText(1), Version: stmt.ColumnInt64(2), Type: stmt.ColumnText(3),
			Data: stmt.ColumnText(4), Meta: stmt.ColumnText(5), RecordedAt: stmt.ColumnText(6),
			PrevHash: columnBytes(stmt, 7), Hash: columnBytes(stmt, 8),
		})
		if err := fn(ev); err != nil {
			return err
		}
	}
}

func columnBytes(stmt *sqlite.Stmt, col int) []byte {
	b := make([]byte, stmt.ColumnLen(col))
	stmt.ColumnBytes(col, b)
	return b
}

// openArchive opens an archive file read-only, as it is: immutable, so
// SQLite neither locks it nor creates anything beside it.
func openArchive(path string, a Archive) (*sqlite.Conn, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, &MissingArchiveError{Path: path, FirstSeq: a.FirstSeq, LastSeq: a.LastSeq}
	}
	uri := (&url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&immutable=1"}).String()
	conn, err := sqlite.OpenConn(uri, sqlite.OpenReadOnly|sqlite.OpenURI)
	if err != nil {
		return nil, fmt.Errorf("open archive %s: %w", path, err)
	}
	return conn, nil
}

// ArchiveCheck is what verifying one archive file found.
type ArchiveCheck struct {
	Archive
	Path    string `json:"path"`
	OK      bool   `json:"ok"`
	Missing bool   `json:"missing,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// VerifyArchives checks every archive file the ledger records: its bytes
// hash to what was recorded, its events form a chain from the previous
// archive's last event (or the genesis) to the recorded last hash, and the
// archives follow each other without a gap up to the main file's anchor.
func (l *Ledger) VerifyArchives(ctx context.Context) ([]ArchiveCheck, error) {
	archives, err := l.Archives(ctx)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(l.path)
	out := make([]ArchiveCheck, 0, len(archives))
	prev := chainHead{hash: genesis}
	for _, a := range archives {
		c := ArchiveCheck{Archive: a, Path: filepath.Join(dir, a.File), OK: true}
		c.Problem, c.Missing = checkArchive(ctx, c.Path, a, prev)
		c.OK = c.Problem == ""
		out = append(out, c)
		h, _ := hex.DecodeString(a.LastHash)
		prev = chainHead{seq: a.LastSeq, hash: h}
	}
	return out, nil
}

// checkArchive says what is wrong with one archive file ("" if nothing),
// and whether it is missing.
func checkArchive(ctx context.Context, path string, a Archive, prev chainHead) (problem string, missing bool) {
	if a.FirstSeq != prev.seq+1 || a.PrevHash != hex.EncodeToString(prev.hash) {
		return fmt.Sprintf("the archive of %d..%d does not follow the previous one (which ends at seq %d)", a.FirstSeq, a.LastSeq, prev.seq), false
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return (&MissingArchiveError{Path: path, FirstSeq: a.FirstSeq, LastSeq: a.LastSeq}).Error(), true
	}
	sum, err := fileHash(path)
	if err != nil {
		return err.Error(), false
	}
	if hex.EncodeToString(sum) != a.ContentHash {
		return fmt.Sprintf("the file's content hash is %.16s…, not the %.16s… recorded: it was changed after it was written", hex.EncodeToString(sum), a.ContentHash), false
	}
	h := prev
	const stop = verifyStop("stop")
	err = readArchive(path, a, a.FirstSeq-1, a.LastSeq, func(ev Event) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p := h.link(ev); p != "" {
			problem = fmt.Sprintf("the chain breaks at seq %d: %s", ev.Seq, p)
			return stop
		}
		h = chainHead{seq: ev.Seq, hash: ev.Hash}
		return nil
	})
	switch {
	case err != nil && err != stop:
		return err.Error(), false
	case problem != "":
		return problem, false
	case h.seq != a.LastSeq || hex.EncodeToString(h.hash) != a.LastHash:
		return fmt.Sprintf("the archive ends at seq %d, not at the recorded seq %d and hash", h.seq, a.LastSeq), false
	}
	return "", false
}

// fileHash is the BLAKE3-256 of a file's bytes.
func fileHash(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := blake3.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// syncFile flushes a file or directory to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
