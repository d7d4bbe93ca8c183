package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pressly/goose/v3"
	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", used only to migrate
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
