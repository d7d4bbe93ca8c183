package ledger

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// BackupResult is what Backup copied.
type BackupResult struct {
	Path     string    `json:"path"`     // the copy
	Head     int64     `json:"head_seq"` // the newest event in the copy
	HeadHash string    `json:"head_hash,omitempty"`
	Pages    int       `json:"pages"` // database pages copied
	Bytes    int64     `json:"bytes"` // the copy's size
	Archives []Archive `json:"archives,omitempty"`
}

// backupStepPages is how many pages one step of the online backup copies
// (8 MiB of 4 KiB pages): the unit of progress and of cancellation.
const backupStepPages = 2048

// Backup writes a copy of the ledger as of one moment to dst, a file that
// must not exist yet, while writers go on appending: SQLite's online
// backup copies the pages of one read snapshot, held for the whole copy
// (so the WAL cannot be checkpointed past it meanwhile, and grows by what
// is appended during the copy). The copy is a single file in rollback
// journal mode (no -wal beside it), flushed, and renamed into place only
// when complete: an interrupted backup leaves no dst. The archive files
// the snapshot records are copied beside dst under their recorded names
// (one already there is kept: archives never change). progress, if set,
// is called after each step with the pages copied and the total.
func (l *Ledger) Backup(ctx context.Context, dst string, progress func(done, total int)) (r BackupResult, err error) {
	r.Path = dst
	if _, err := os.Stat(dst); err == nil {
		return r, fmt.Errorf("backup: %s already exists: choose a new file or remove it first", dst)
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".backup-*")
	if err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			for _, p := range []string{tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"} {
				os.Remove(p)
			}
		}
	}()
	out, err := sqlite.OpenConn(tmp, sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	var srcDir string
	err = func() (err error) {
		defer func() {
			if cerr := out.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
			// The snapshot starts with this read; every step copies from it.
			head, err := readHead(conn)
			if err != nil {
				return err
			}
			r.Head = head.seq
			if head.seq > 0 {
				r.HeadHash = hex.EncodeToString(head.hash)
			}
			if r.Archives, err = archivesConn(conn); err != nil {
				return err
			}
			if srcDir, err = ledgerDir(conn); err != nil {
				return err
			}
			b, err := sqlite.NewBackup(out, "main", conn, "main")
			if err != nil {
				return err
			}
			for more := true; more; {
				if err := ctx.Err(); err != nil {
					b.Close()
					return err
				}
				if more, err = b.Step(backupStepPages); err != nil {
					b.Close()
					return err
				}
				r.Pages = b.PageCount()
				if progress != nil {
					progress(b.PageCount()-b.Remaining(), b.PageCount())
				}
			}
			return b.Close()
		})
		if err != nil {
			return err
		}
		// One file that holds every commit: nothing to carry beside it.
		for _, p := range []string{"PRAGMA journal_mode = DELETE;", "PRAGMA synchronous = FULL;"} {
			if err := sqlitex.ExecuteTransient(out, p, nil); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	for _, a := range r.Archives {
		if err := copyArchive(filepath.Join(srcDir, a.File), filepath.Join(dir, a.File)); err != nil {
			return r, fmt.Errorf("backup: copy the archive of events %d..%d: %w", a.FirstSeq, a.LastSeq, err)
		}
	}
	if err := placeNew(tmp, dst); err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(dir); err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return r, fmt.Errorf("backup: %w", err)
	}
	r.Bytes = fi.Size()
	return r, nil
}

// copyArchive copies an archive file to to, unless to already exists
// (archives never change: ledger verify checks their content hashes).
func copyArchive(from, to string) (err error) {
	if _, err := os.Stat(to); err == nil {
		return nil
	}
	src, err := os.Open(from)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is missing: put it back beside the ledger, then back up again", from)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := to + ".partial"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = io.Copy(dst, src); err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

// placeNew gives the file tmp the name dst, never over an existing dst: a
// hard link then the removal of tmp, or, on a file system without hard
// links (a FAT-formatted USB stick), a rename after a check.
func placeNew(tmp, dst string) error {
	err := os.Link(tmp, dst)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s appeared while the backup ran: choose a new file", dst)
	}
	if err != nil {
		if _, serr := os.Stat(dst); serr == nil {
			return fmt.Errorf("%s appeared while the backup ran: choose a new file", dst)
		}
		return os.Rename(tmp, dst)
	}
	return os.Remove(tmp)
}
