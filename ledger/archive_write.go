package ledger

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/zeebo/blake3"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/queries/archivefile"
)

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
		if err := sqlitex.ExecuteScript(out, archivefile.Schema, nil); err != nil {
			return err
		}
		end, err := sqlitex.ImmediateTransaction(out)
		if err != nil {
			return err
		}
		defer end(&err)
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
				err := archivefile.InsertEvent(out, archivefile.InsertEventParams{
					Seq: ev.Seq, Stream: ev.Stream, Version: ev.Version, Type: ev.Type, Data: string(ev.Data), Meta: string(ev.Meta),
					RecordedAt: ev.recordedAt, PrevHash: ev.PrevHash, Hash: ev.Hash,
				})
				if err != nil {
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
			if err := archivefile.SetInfo(out, archivefile.SetInfoParams{Key: k, Value: v}); err != nil {
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
