package ledger

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

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
