package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/queries/archivefile"
)

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
	// A pragma (sqlc compiles no pragma), so a Go string: its rows are
	// (seq, name, file) for each database of the connection.
	err := sqlitex.ExecuteTransient(conn, "PRAGMA database_list;", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error {
			if stmt.ColumnText(1) == "main" {
				file = stmt.ColumnText(2)
			}
			return nil
		},
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
	var fnErr error // fn's own error, returned as it is
	err = archivefile.ReadEvents(conn, archivefile.ReadEventsParams{AfterSeq: after, UntilSeq: until}, func(r archivefile.ReadEventsRow) error {
		fnErr = fn(eventFromRow(queries.ReadStreamRow(r)))
		return fnErr
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil:
		return fmt.Errorf("read archive %s: %w", path, err)
	}
	return nil
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
