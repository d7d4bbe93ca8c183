package ledger

import (
	"errors"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"
)

// WriteHealth says whether this process's writes to the ledger succeed. A
// write that fails in SQLite or the disk (full, an I/O error, a read-only
// or vanished file, a lock another process holds past the busy timeout, a
// failed fsync) makes it failing, from the first such failure until a
// write succeeds again. A write refused for what it asked (a conflict, an
// invalid command) says nothing of the disk and changes nothing.
type WriteHealth struct {
	Failing bool `json:"failing"`
	// Since is when the writes began to fail (the first failure of this
	// run of failures).
	Since time.Time `json:"since,omitzero"`
	// LastError is the newest failure's error.
	LastError string `json:"last_error,omitempty"`
	// Failures counts the transactions that failed since Since.
	Failures int64 `json:"failures,omitempty"`
}

// writeHealth is a Ledger's WriteHealth, kept by the writer and the syncer.
type writeHealth struct {
	mu    sync.Mutex
	state WriteHealth
}

// WriteHealth says whether the ledger's writes succeed now, and if not,
// since when and why.
func (l *Ledger) WriteHealth() WriteHealth {
	l.writes.mu.Lock()
	defer l.writes.mu.Unlock()
	return l.writes.state
}

// noteWrite records how a write transaction went: err is its error (nil:
// it committed). Only failures of the storage count.
func (l *Ledger) noteWrite(err error) {
	w := &l.writes
	failed := storageFailure(err)
	if err != nil && !failed {
		return
	}
	unchanged := false
	w.mu.Lock()
	defer func() {
		now := w.state
		w.mu.Unlock()
		if l.opts.OnWriteHealth != nil && !unchanged {
			l.opts.OnWriteHealth(now)
		}
	}()
	switch {
	case failed && !w.state.Failing:
		w.state = WriteHealth{Failing: true, Since: l.opts.Now().UTC(), LastError: err.Error(), Failures: 1}
		l.log.Error("ledger writes are failing: nothing can be recorded until they succeed again", "err", err.Error(),
			"fix", "free disk space, or end what locks or broke the ledger's file; see: ductile system status")
	case failed:
		w.state.LastError = err.Error()
		w.state.Failures++
	case w.state.Failing:
		l.log.Warn("ledger writes succeed again", "failing_since", w.state.Since, "failures", w.state.Failures)
		w.state = WriteHealth{}
	default:
		unchanged = true
	}
}

// noteBatch records how an append transaction went: err is the whole
// batch's error; without one, a request whose own statement failed in the
// storage still counts, and only a commit that appended proves the writes
// succeed (one of refused decisions alone wrote nothing).
func (l *Ledger) noteBatch(err error, batch []*request, appended bool) {
	for _, r := range batch {
		if err == nil && storageFailure(r.err) {
			err = r.err
		}
	}
	if err != nil || appended {
		l.noteWrite(err)
	}
}

// errRolledBack is a transaction SQLite rolled back on its own (after an
// I/O error, a full disk…) without a statement reporting it.
var errRolledBack = errors.New("transaction rolled back")

// storageFailure reports whether err is a failure of the storage rather
// than of what was asked.
func storageFailure(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errRolledBack) || errors.Is(err, ErrNotDurable) {
		return true
	}
	switch sqlite.ErrCode(err).ToPrimary() {
	case sqlite.ResultFull, sqlite.ResultIOErr, sqlite.ResultReadOnly, sqlite.ResultCantOpen, sqlite.ResultCorrupt,
		sqlite.ResultNotADB, sqlite.ResultNoMem, sqlite.ResultBusy, sqlite.ResultLocked, sqlite.ResultPerm:
		return true
	}
	return false
}
