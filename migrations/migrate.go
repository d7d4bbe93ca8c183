package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/pressly/goose/v3"
	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", used only to migrate
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// Up applies every pending migration to the SQLite file at path, creating it
// if needed, and returns the schema version it ends at. It uses goose's
// Provider over database/sql; the application itself talks to the file
// through zombiezen afterwards.
func Up(ctx context.Context, path string) (int64, error) {
	// goose has no migration lock for SQLite: two processes starting on a
	// fresh file would both see version 0. An flock on the database file
	// serialises them (flock and SQLite's own fcntl locks do not interact).
	unlock, err := lockFile(path)
	if err != nil {
		return 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	defer unlock()
	p, db, err := provider(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate %s: read version: %w", path, err)
	}
	return v, nil
}

// Status reports the current schema version and the newest one this binary
// knows. A file that does not exist is at version 0 and is not created.
func Status(ctx context.Context, path string) (current, latest int64, err error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, Latest(), nil
	}
	p, db, err := provider(path)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	current, err = p.GetDBVersion(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migration status %s: %w", path, err)
	}
	return current, Latest(), nil
}

// Applied reads the newest schema version applied to the database open on
// conn (0 if none), without writing: for a reader that must not migrate.
// The table is goose's own, so sqlc cannot compile a query on it.
func Applied(conn *sqlite.Conn) (int64, error) {
	var exists bool
	err := sqlitex.Execute(conn, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'goose_db_version';",
		&sqlitex.ExecOptions{ResultFunc: func(*sqlite.Stmt) error { exists = true; return nil }})
	if err != nil || !exists {
		return 0, err
	}
	var v int64
	err = sqlitex.Execute(conn, "SELECT coalesce(max(version_id), 0) FROM goose_db_version;",
		&sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { v = s.ColumnInt64(0); return nil }})
	return v, err
}

// Latest is the newest schema version this binary knows.
func Latest() int64 {
	entries, _ := fs.Glob(FS, "*.sql")
	var latest int64
	for _, name := range entries {
		if v, err := goose.NumericComponent(name); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

func provider(path string) (*goose.Provider, *sql.DB, error) {
	// _txlock=immediate: goose's transactions take the write lock up front, so
	// a migration never deadlocks against another process's writer.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, FS)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	return p, db, nil
}

// WaitForMigration returns once no process is migrating the file at path
// (Up holds an exclusive flock on it while it runs), or when ctx ends or
// timeout passes. A reader that finds the schema behind calls it before
// saying so: the file may be being created. It polls, since a blocked flock
// cannot be interrupted.
func WaitForMigration(ctx context.Context, path string, timeout time.Duration) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			return unix.Flock(int(f.Fd()), unix.LOCK_UN)
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("wait for a migration of %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for a migration of %s: still running after %v", path, timeout)
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock for migration: %w", err)
	}
	return func() { f.Close() }, nil
}
