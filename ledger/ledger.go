package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/migrations"
)

// Options tune a Ledger. The zero value is the production setting.
type Options struct {
	// Synchronous says when a durable append returns: "FULL" (default), once
	// its commit is fsynced; "NORMAL", once committed (tests and benchmarks
	// that measure something else; a power cut can lose the newest appends).
	Synchronous string
	// ReadConns is the size of the read pool (default 4).
	ReadConns int
	// BusyTimeout bounds how long a connection waits for another process's
	// lock (default 10s).
	BusyTimeout time.Duration
	// MaxBatch caps how many append calls share one transaction (default 1024).
	MaxBatch int
	// Now is the clock for recorded_at (default time.Now).
	Now func() time.Time
	// Logger receives warnings (default slog.Default()).
	Logger *slog.Logger
	// SkipMigrate opens the file as it is, without applying migrations or
	// checking its head (which needs the current schema): for tests of old
	// schemas.
	SkipMigrate bool
	// AllowDamaged lets a writer open a ledger whose head does not match what
	// was recorded of it (events removed from its end) or whose chain is
	// broken past the last recorded head (head.go): the damage is logged and
	// reported by Damage instead of failing Open with a *DamagedError.
	AllowDamaged bool
	// AdoptRestore lets a writer open a ledger whose only problem is that
	// its head witness is ahead of it (HeadCheck.Lagging: a copy restored
	// from a backup or a replica into the directory of the ledger it
	// replaces), and nothing else AllowDamaged would accept: Damage
	// reports what was adopted and the witness is written anew by the
	// next flush. The caller records the adoption (ductile ledger
	// adopt-restore appends ledger.restore_adopted).
	AdoptRestore bool
	// ReadOnly opens an existing file for reading only (readonly.go):
	// nothing is migrated, created or written, and appends fail with
	// ErrReadOnly. A missing file fails with ErrNoLedger, a schema older
	// than this binary's with a *SchemaError.
	ReadOnly bool
	// BeforeCommit, if set, is called on the writer goroutine in every
	// append transaction that appends events, once they are inserted and
	// projected inline and just before COMMIT, with those events. It is a
	// fault point for crash tests (a hook that kills the process here leaves
	// decisions made but not committed); leave it nil otherwise.
	BeforeCommit func(appended []Event)
	// OnWriteHealth, if set, is called with the new WriteHealth each time a
	// write fails in the storage and when writes succeed again, on the
	// goroutine that saw it (the writer's or the syncer's): it must be
	// quick and must not write to the ledger.
	OnWriteHealth func(WriteHealth)

	// syncWAL replaces the syncer's fsync of the WAL file when set: this
	// package's tests observe through it the order of flushes and answers.
	syncWAL func(wal *os.File) error
}

// Ledger is the event store over one SQLite file.
type Ledger struct {
	path string
	opts Options
	log  *slog.Logger

	writer *sqlite.Conn // owned by the writer goroutine once Open returns
	reads  *sqlitex.Pool
	// followers holds a token per Follow page read under way (follow.go):
	// followers never take the whole read pool.
	followers chan struct{}

	mu     sync.RWMutex // guards closed; held for reading while sending on reqs
	closed bool
	reqs   chan *request
	done   chan struct{} // closed when the writer goroutine has exited

	notify  notifier
	watcher *walWatcher
	bell    *os.File // the doorbell this process rings (notify.go); nil if it cannot
	syncer  syncer
	writes  writeHealth // whether writes succeed (writehealth.go)
	inline  atomic.Pointer[InlineProjection]
	folds   foldCache  // the writer goroutine's (fold.go)
	view    writerView // the writer goroutine's (append.go)
	// committed is the chain head after this process's last commit (or as
	// found at open): what the syncer's next flush makes durable.
	committed atomic.Pointer[chainHead]
	damage    *HeadCheck // what Open found wrong and accepted (AllowDamaged)
	stats     struct{ commits, syncs, synced atomic.Int64 }
}

// WriteStats count this Ledger's write work since it was opened.
type WriteStats struct {
	Commits int64 `json:"commits"` // append transactions committed
	Syncs   int64 `json:"syncs"`   // fsyncs of the WAL by the syncer
	Synced  int64 `json:"synced"`  // commits a successful fsync covered: Commits − Synced are not durable yet
	// FoldsCached and FoldsRead count the stream folds decisions asked
	// for (Fold): taken from the cache, or read from their streams.
	FoldsCached int64 `json:"folds_cached"`
	FoldsRead   int64 `json:"folds_read"`
}

// WriteStats reports how many commits and fsyncs this Ledger's appends took,
// and where its decisions' folds came from.
func (l *Ledger) WriteStats() WriteStats {
	return WriteStats{Commits: l.stats.commits.Load(), Syncs: l.stats.syncs.Load(), Synced: l.stats.synced.Load(),
		FoldsCached: l.folds.cached.Load(), FoldsRead: l.folds.read.Load()}
}

// Open migrates the SQLite file at path (creating it and its directory if
// needed), then opens one writer connection and a pool of readers.
func Open(ctx context.Context, path string, opts Options) (*Ledger, error) {
	if opts.Synchronous == "" {
		opts.Synchronous = "FULL"
	}
	if opts.Synchronous != "FULL" && opts.Synchronous != "NORMAL" {
		return nil, fmt.Errorf("open ledger: synchronous must be FULL or NORMAL, not %q", opts.Synchronous)
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1024
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, abs, opts)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if err := matchSideFileModes(abs); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if !opts.SkipMigrate {
		if _, err := migrations.Up(ctx, abs); err != nil {
			return nil, fmt.Errorf("open ledger: %w", err)
		}
	}

	l := &Ledger{
		path: abs,
		opts: opts,
		log:  opts.Logger.With("component", "ledger"),
		reqs: make(chan *request, opts.MaxBatch),
		done: make(chan struct{}),

		followers: make(chan struct{}, followerConns(opts.ReadConns)),
	}
	l.notify.init()

	l.writer, err = sqlite.OpenConn(abs, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL|sqlite.OpenURI)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	// Pragmas are per connection and cannot run inside a transaction, so they
	// are set here, once, outside any.
	if err := l.setPragmas(l.writer, false); err != nil {
		l.writer.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	l.reads, err = sqlitex.NewPool(abs, sqlitex.PoolOptions{
		Flags:    sqlite.OpenReadWrite | sqlite.OpenWAL | sqlite.OpenURI,
		PoolSize: opts.ReadConns,
		PrepareConn: func(conn *sqlite.Conn) error {
			return l.setPragmas(conn, true)
		},
	})
	if err != nil {
		l.writer.Close()
		return nil, fmt.Errorf("open ledger %s: read pool: %w", abs, err)
	}
	if err := l.loadHead(ctx); err != nil {
		l.reads.Close()
		l.writer.Close()
		return nil, err
	}
	if !opts.SkipMigrate {
		if err := l.checkOpen(ctx); err != nil {
			l.reads.Close()
			l.writer.Close()
			return nil, err
		}
	}
	if err := l.startSyncer(); err != nil {
		l.reads.Close()
		l.writer.Close()
		return nil, fmt.Errorf("open ledger %s: %w", abs, err)
	}
	if l.bell, err = openDoorbell(abs); err != nil {
		l.log.Warn("cannot open the ledger's doorbell: other processes will see this one's appends a few milliseconds later", "err", err)
	}
	l.watcher, err = watchWAL(abs, &l.notify, l.projecting, l.log)
	if err != nil {
		// Other processes' appends will then only be seen on our own commits
		// or a caller's own polling; this process still works.
		l.log.Warn("cannot watch the ledger for other processes' appends", "err", err)
	}
	go l.writeLoop()
	return l, nil
}

// setPragmas configures one connection. Readers are query_only, so a bug
// cannot write through them: all writes go through the writer.
// matchSideFileModes gives the database's -wal and -shm files, where this
// user owns them and they are read-only while the database is not, the
// database file's permissions. SQLite creates them with
// the database's mode as it is at that moment, so a reader of a 0444
// database leaves 0444 side files behind, and once the database is writable
// again every writer would fail on them ("attempt to write a readonly
// database").
func matchSideFileModes(dbPath string) error {
	db, err := os.Stat(dbPath)
	if err != nil || db.Mode().Perm()&0o200 == 0 {
		return nil // no database yet, or one no writer can open anyway
	}
	for _, side := range []string{dbPath + "-wal", dbPath + "-shm"} {
		fi, err := os.Stat(side)
		if err != nil || fi.Mode().Perm()&0o200 != 0 {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if err := os.Chmod(side, db.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

func (l *Ledger) setPragmas(conn *sqlite.Conn, reader bool) error {
	conn.SetBusyTimeout(l.opts.BusyTimeout)
	var pragmas []string
	if !l.opts.ReadOnly {
		// (A read-only connection can change none of these for the file.)
		pragmas = append(pragmas,
			"PRAGMA journal_mode = WAL;",
			"PRAGMA foreign_keys = ON;",
			// Commits do not fsync: the syncer fsyncs the WAL for durable
			// appends off the writer's path (sync.go). Checkpoints still sync.
			"PRAGMA synchronous = "+l.commitSync()+";",
		)
	}
	// A 16 MiB page cache per connection. No mmap: the file grows with
	// every checkpoint, and each growth made every connection remap it and
	// fault its pages in again; BenchmarkJobLifecycle spends 3–10% less CPU
	// per job without it.
	pragmas = append(pragmas, "PRAGMA cache_size = -16384;")
	if reader {
		pragmas = append(pragmas, "PRAGMA query_only = ON;")
	}
	for _, p := range pragmas {
		if err := sqlitex.ExecuteTransient(conn, p, nil); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// commitSync is the synchronous level of the connections' commits.
func (l *Ledger) commitSync() string {
	if l.unbatched() && l.opts.Synchronous == "FULL" {
		return "FULL"
	}
	return "NORMAL"
}

// Path is the ledger's SQLite file.
func (l *Ledger) Path() string { return l.path }

// Close stops accepting appends, lets queued ones finish, and closes the
// connections.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.reqs)
	l.mu.Unlock()
	<-l.done
	var errs []error
	errs = append(errs, l.stopSyncer())
	if l.watcher != nil {
		errs = append(errs, l.watcher.Close())
	}
	if l.bell != nil {
		errs = append(errs, l.bell.Close())
	}
	errs = append(errs, l.reads.Close())
	if l.writer != nil {
		errs = append(errs, l.writer.Close())
	}
	l.notify.close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close ledger: %w", err)
	}
	return nil
}

// Read runs fn with a read-only connection from the pool. fn must reset any
// statement it steps (the generated queries do).
func (l *Ledger) Read(ctx context.Context, fn func(conn *sqlite.Conn) error) error {
	conn, err := l.reads.Take(ctx)
	if err != nil {
		return fmt.Errorf("read ledger: %w", err)
	}
	defer l.reads.Put(conn)
	return fn(conn)
}

// ReadSnapshot is Read inside one read transaction, so every query fn runs
// sees the same state of the file.
func (l *Ledger) ReadSnapshot(ctx context.Context, fn func(conn *sqlite.Conn) error) error {
	return l.Read(ctx, func(conn *sqlite.Conn) (err error) {
		end := sqlitex.Transaction(conn)
		defer end(&err)
		return fn(conn)
	})
}
