package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/migrations"
)

var (
	// ErrNoLedger means there is no ledger file where one was looked for.
	ErrNoLedger = errors.New("no ledger")
	// ErrReadOnly is returned by every write to a ledger opened read-only.
	ErrReadOnly = errors.New("the ledger is open read-only")
)

// SchemaError means a ledger opened read-only has migrations pending: the
// queries of this binary expect a newer schema than the file has.
type SchemaError struct {
	Path    string
	Version int64 // applied to the file
	Latest  int64 // this binary's newest
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("the ledger %s is at schema version %d and this binary reads version %d: it needs migrating", e.Path, e.Version, e.Latest)
}

// openReadOnly opens an existing ledger for reading only: no migration, no
// writer connection, no syncer, nothing created. SQLite writes nothing to
// the database file through a read-only connection; see readOnlyURI for the
// WAL's side files.
func openReadOnly(ctx context.Context, abs string, opts Options) (*Ledger, error) {
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s", ErrNoLedger, abs)
	}
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open ledger %s: not a regular file", abs)
	}
	l := &Ledger{
		path: abs,
		opts: opts,
		log:  opts.Logger.With("component", "ledger"),
		reqs: make(chan *request),
		done: make(chan struct{}),

		followers: make(chan struct{}, followerConns(opts.ReadConns)),
	}
	close(l.done) // no writer goroutine
	l.notify.init()
	l.reads, err = sqlitex.NewPool(readOnlyURI(abs), sqlitex.PoolOptions{
		Flags:    sqlite.OpenReadOnly | sqlite.OpenURI,
		PoolSize: opts.ReadConns,
		PrepareConn: func(conn *sqlite.Conn) error {
			return l.setPragmas(conn, true)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("open ledger %s read-only: %w", abs, explainReadOnly(abs, err))
	}
	err = l.checkSchema(ctx)
	if err == nil {
		err = l.loadHead(ctx)
	}
	if err != nil {
		l.reads.Close()
		return nil, explainReadOnly(abs, err)
	}
	if l.watcher, err = watchWAL(abs, &l.notify, func() bool { return false }, l.log); err != nil {
		l.log.Warn("cannot watch the ledger for other processes' appends", "err", err)
	}
	return l, nil
}

// checkSchema fails unless the file's schema is this binary's: a reader
// must not migrate. A file behind may be one another process is creating
// or migrating right now: wait for that first, then look again. A file
// still empty then holds no ledger.
func (l *Ledger) checkSchema(ctx context.Context) error {
	applied := func() (version int64, err error) {
		err = l.Read(ctx, func(conn *sqlite.Conn) (err error) {
			version, err = migrations.Applied(conn)
			return err
		})
		return version, err
	}
	version, err := applied()
	if err != nil || version >= migrations.Latest() {
		return err
	}
	if err := migrations.WaitForMigration(ctx, l.path, l.opts.BusyTimeout); err != nil {
		return err
	}
	if version, err = applied(); err != nil || version >= migrations.Latest() {
		return err
	}
	if fi, err := os.Stat(l.path); err == nil && fi.Size() == 0 {
		return fmt.Errorf("%w at %s (the file is empty)", ErrNoLedger, l.path)
	}
	return &SchemaError{Path: l.path, Version: version, Latest: migrations.Latest()}
}

// explainReadOnly says why SQLite could not open a ledger read-only where
// it can tell: a -wal with no -shm in a directory this user cannot write is
// a WAL SQLite cannot read without creating the -shm.
func explainReadOnly(path string, err error) error {
	_, walErr := os.Stat(path + "-wal")
	_, shmErr := os.Stat(path + "-shm")
	if walErr != nil || !errors.Is(shmErr, fs.ErrNotExist) || unix.Access(filepath.Dir(path), unix.W_OK) == nil {
		return err
	}
	return fmt.Errorf("%w (the ledger has a -wal file but no -shm, and its directory %s cannot be written, "+
		"so SQLite cannot read it: open it once where it can be written, with any ductile command that writes, "+
		"or copy the state directory somewhere writable)", err, filepath.Dir(path))
}

// readOnlyURI is the URI a read-only connection opens. In WAL mode even a
// reader needs the -wal and -shm files beside the database, to see commits
// not yet copied into it and to coordinate with writers: with mode=ro
// SQLite uses them if they exist and creates them (empty, owned like the
// database) if it can, writing nothing to the database file itself. Where it
// cannot create them (a read-only mount, a directory this user may not
// write) and there is no -wal, the database file holds every commit and no
// process of this user can be writing to it: immutable=1 tells SQLite to read
// it as it is, without locks or side files.
func readOnlyURI(path string) string {
	query := "mode=ro"
	if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) && unix.Access(filepath.Dir(path), unix.W_OK) != nil {
		query = "immutable=1"
	}
	return (&url.URL{Scheme: "file", Path: path, RawQuery: query}).String()
}
