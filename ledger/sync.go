package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// The syncer makes commits durable off the writer's path.
//
// With synchronous=FULL, SQLite fsyncs the WAL inside COMMIT, on the one
// writer connection: every append queued behind a commit waits for that
// disk flush, including appends that need no flush of their own (a job's
// start). Instead, the writer commits with synchronous=NORMAL (the frames
// are written to the WAL, not flushed) and hands the durable requests to
// this goroutine, which fsyncs the WAL file and only then answers them.
// Meanwhile the writer goes on with the next batch, and one fsync covers
// every commit made before it started. Because the WAL is written in order,
// a flush that covers a commit covers every commit before it: a caller that
// was answered can never lose its append to a power cut, which is exactly
// what synchronous=FULL promises. (Checkpoints, which copy the WAL into the
// database file, still fsync as SQLite does under NORMAL.)
//
// Relaxed requests are answered at commit; the syncer then flushes within
// RelaxedSyncDelay (unless a durable flush covers them first), so the
// window in which a power cut can take a relaxed commit is bounded, and
// under load one flush serves every relaxed commit of the interval.
//
// After each successful flush, once its callers are answered, the syncer
// writes the head it made durable to the head witness (head.go): one
// pwrite, no fsync (a witness lost to a power cut only vouches for less).
type syncer struct {
	wal     *os.File             // the database's -wal file, opened for fsync only
	sync    func(*os.File) error // (*os.File).Sync, unless a test set Options.syncWAL
	witness *os.File             // the head witness; nil if it could not be opened
	// witnessed is the head last written to the witness (syncLoop's own).
	witnessed *chainHead
	queue     chan []*request
	relaxed   chan struct{} // a relaxed commit wants a flush within RelaxedSyncDelay
	lazyDue   atomic.Bool   // that flush is already asked for
	done      chan struct{}
	// failed is the first fsync error. After one, Linux may have dropped the
	// unwritten pages and a later fsync can succeed without them, so no
	// later append may be called durable: the ledger refuses appends.
	failed atomic.Pointer[error]
	// writerBusy is set while the writer runs a transaction.
	writerBusy atomic.Bool
}

func (l *Ledger) startSyncer() error {
	l.syncer.done = make(chan struct{})
	if l.opts.Synchronous != "FULL" || l.unbatched() {
		close(l.syncer.done)
		return nil
	}
	// The writer has opened the database in WAL mode, so the file exists;
	// SQLite reuses it (from offset 0) rather than replacing it.
	wal, err := os.OpenFile(l.path+"-wal", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open WAL for fsync: %w", err)
	}
	// Make the WAL's own directory entry durable once, so a flushed WAL
	// cannot vanish with a power cut right after it was created.
	if dir, err := os.Open(filepath.Dir(l.path)); err != nil {
		// A directory we may write but not list: the WAL's entry becomes
		// durable with the filesystem's next journal commit instead.
		l.log.Warn("cannot open the ledger's directory to sync it", "err", err)
	} else {
		err = dir.Sync()
		dir.Close()
		if err != nil {
			wal.Close()
			return fmt.Errorf("sync the ledger's directory: %w", err)
		}
	}
	l.syncer.wal = wal
	l.syncer.sync = (*os.File).Sync
	if l.opts.syncWAL != nil {
		l.syncer.sync = l.opts.syncWAL
	}
	if l.syncer.witness, err = os.OpenFile(WitnessPath(l.path), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		// Appends stay durable; only a later truncation goes unnoticed by it.
		l.log.Warn("cannot open the head witness; truncations of the ledger will be caught by the projector's checkpoint alone", "err", err)
	}
	l.syncer.queue = make(chan []*request, l.opts.MaxBatch)
	l.syncer.relaxed = make(chan struct{}, 1)
	go l.syncLoop()
	return nil
}

// release answers the requests of a finished transaction: failed and
// relaxed ones at once, durable ones through the syncer. A relaxed commit
// asks the syncer for a flush within RelaxedSyncDelay.
func (l *Ledger) release(reqs []*request) {
	atOnce := func(r *request) bool { return r.err != nil || r.relaxed || l.syncer.queue == nil }
	var durable []*request
	relaxed := false
	for _, r := range reqs {
		if atOnce(r) {
			relaxed = relaxed || (r.err == nil && r.relaxed)
		} else {
			durable = append(durable, r)
		}
	}
	if len(durable) == 0 && relaxed && l.syncer.queue != nil && !l.syncer.lazyDue.Swap(true) {
		// The first relaxed commit since the last flush arms the delay;
		// later ones ride along without waking the syncer. Armed before
		// anyone is answered: an answered caller finds its flush asked for.
		select {
		case l.syncer.relaxed <- struct{}{}:
		default: // a request is already pending
		}
	}
	for _, r := range reqs {
		if atOnce(r) {
			close(r.done)
		}
	}
	if len(durable) > 0 {
		l.syncer.queue <- durable
	}
}

// RelaxedSyncDelay bounds how long a relaxed append stays unsynced: the
// syncer flushes the WAL that long after a relaxed commit, unless a durable
// append's flush has covered it first. Under load, one flush then covers
// every relaxed commit of the interval.
const RelaxedSyncDelay = 10 * time.Millisecond

// answer releases durable requests once their flush is done.
func (l *Ledger) answer(reqs []*request, syncErr error) {
	if p := l.syncer.failed.Load(); p != nil {
		syncErr = *p
	}
	for _, r := range reqs {
		if syncErr != nil {
			// The events are in the log (readers may already act on them)
			// and keep their seqs; only their survival of a power cut is
			// in doubt, which the caller must know before appending again.
			r.err = fmt.Errorf("%w: the append committed (seqs %v) but may not survive a power cut: %v", ErrNotDurable, r.seqs, syncErr)
		}
		close(r.done)
	}
}

// ErrNotDurable means an fsync of the ledger failed: the append may not
// survive a power cut, and the ledger refuses further appends until it is
// reopened (restart ductile; check the disk).
var ErrNotDurable = errors.New("the ledger could not be made durable (fsync failed); restart ductile and check the disk")

func (l *Ledger) syncLoop() {
	defer close(l.syncer.done)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	lazy := time.NewTimer(time.Hour) // the bounded delay of relaxed commits
	lazy.Stop()
	lazyArmed := false
	unsynced := func() bool { return l.stats.commits.Load() > l.stats.synced.Load() }
	var flushed *chainHead // the head the last successful flush made durable
	flush := func() error {
		// Commits from now on need a flush of their own (this one may not
		// cover them): let the next relaxed one ask again.
		l.syncer.lazyDue.Store(false)
		covered := l.stats.commits.Load()
		// Committed before the fsync starts, so the fsync covers it.
		head := l.committed.Load()
		l.stats.syncs.Add(1)
		err := l.syncer.sync(l.syncer.wal)
		if err == nil {
			l.stats.synced.Store(covered)
			flushed = head
		} else {
			l.syncer.failed.CompareAndSwap(nil, &err)
			l.noteWrite(fmt.Errorf("%w: fsync of the WAL: %v", ErrNotDurable, err))
		}
		return err
	}
	defer func() { l.witness(flushed) }()
	for {
		var batch []*request
		select {
		case b, ok := <-l.syncer.queue:
			if !ok {
				if unsynced() {
					flush() // shutting down: leave nothing unsynced
				}
				return
			}
			batch = b
		case <-l.syncer.relaxed:
			if !lazyArmed {
				lazy.Reset(RelaxedSyncDelay)
				lazyArmed = true
			}
			continue
		case <-lazy.C:
			lazyArmed = false
			// Whether or not there is anything to flush (the request may
			// have come from a projection write, or from a commit an earlier
			// flush already covered), the next relaxed commit asks anew.
			l.syncer.lazyDue.Store(false)
			if unsynced() && l.syncer.failed.Load() == nil {
				flush()
				l.witness(flushed)
			}
			continue
		}
		// While the writer is committing, its durable requests are about to
		// follow: wait for them (1 ms at most) so one flush covers both.
		linger.Reset(time.Millisecond)
	gather:
		for len(batch) < l.opts.MaxBatch {
			if !l.syncer.writerBusy.Load() {
				select {
				case more, ok := <-l.syncer.queue:
					if !ok {
						break gather
					}
					batch = append(batch, more...)
					continue
				default:
					break gather
				}
			}
			select {
			case more, ok := <-l.syncer.queue:
				if !ok {
					break gather
				}
				batch = append(batch, more...)
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
		l.answer(batch, flush())
		l.witness(flushed)
	}
}

// witness records h, a head a flush has made durable, in the head witness
// (unless it is already there). Only syncLoop calls it.
func (l *Ledger) witness(h *chainHead) {
	w := l.syncer.witness
	if w == nil || h == nil || h.seq == 0 || h == l.syncer.witnessed || l.syncer.failed.Load() != nil {
		return
	}
	line := encodeWitness(*h)
	_, err := w.WriteAt(line, 0)
	if err == nil && l.syncer.witnessed == nil {
		err = w.Truncate(int64(len(line))) // the first write: drop whatever was longer
	}
	if err != nil {
		l.log.Warn("cannot write the head witness", "err", err)
		return
	}
	l.syncer.witnessed = h
}

// stopSyncer waits for the last flush; the writer has stopped.
func (l *Ledger) stopSyncer() error {
	if l.syncer.queue == nil {
		return nil
	}
	close(l.syncer.queue)
	<-l.syncer.done
	if l.syncer.witness != nil {
		l.syncer.witness.Close()
	}
	return l.syncer.wal.Close()
}

// unbatched is the no-group-commit mode (MaxBatch 1): one transaction per
// append, committed with SQLite's own synchronous=FULL, which flushes inside
// COMMIT. It exists as the baseline group commit is measured against.
func (l *Ledger) unbatched() bool { return l.opts.MaxBatch == 1 }
