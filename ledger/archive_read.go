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
