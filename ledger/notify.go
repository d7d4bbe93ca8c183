package ledger

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// notifier is a broadcast: Changed hands out a channel that is closed (and
// replaced) at the next commit, so any number of goroutines can wait on it
// without polling, and a commit never blocks on a slow waiter.
type notifier struct {
	// lastCommit is when this process last committed (UnixNano): hints
	// that follow it closely are redundant (see watchWAL).
	lastCommit atomic.Int64

	mu       sync.Mutex
	head     int64         // newest seq committed by this process (or found at open)
	ch       chan struct{} // any commit
	external chan struct{} // only hints of other processes' commits
	shut     bool
}

func (n *notifier) init() { n.ch, n.external = make(chan struct{}), make(chan struct{}) }

func (n *notifier) committed(seq int64) {
	n.lastCommit.Store(time.Now().UnixNano())
	n.mu.Lock()
	if seq > n.head {
		n.head = seq
	}
	n.wakeLocked()
	n.mu.Unlock()
}

// poke wakes waiters without a known seq: another process wrote to the file.
func (n *notifier) poke() {
	n.mu.Lock()
	n.wakeLocked()
	if !n.shut {
		close(n.external)
		n.external = make(chan struct{})
	}
	n.mu.Unlock()
}

func (n *notifier) waitExternal() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.external
}

func (n *notifier) wakeLocked() {
	if n.shut {
		return
	}
	close(n.ch)
	n.ch = make(chan struct{})
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) lastSeq() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.head
}

func (n *notifier) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.shut {
		n.shut = true
		close(n.ch)
		close(n.external)
	}
}

// Changed returns a channel closed after the next commit to the ledger, by
// this process or another one. Waiters re-check what they care about; a
// wake-up without news is possible, a missed commit is not.
func (l *Ledger) Changed() <-chan struct{} { return l.notify.wait() }

// External returns a channel closed at the next hint that another process
// may have committed (a write to the WAL file that may not be ours). Waiters
// that already follow this process's own commits by other means use it
// instead of Changed.
func (l *Ledger) External() <-chan struct{} { return l.notify.waitExternal() }

// Watching reports whether other processes' commits are seen (the WAL
// watcher runs); without it, waiters must look for them on their own.
func (l *Ledger) Watching() bool { return l.watcher != nil }

// Head is the newest seq this process has committed or seen at open. Events
// appended by other processes are found by reading (see ReadFrom, LastSeq).
func (l *Ledger) Head() int64 { return l.notify.lastSeq() }

// walWatcher turns writes to the database's WAL file by any process into
// wake-ups, so a daemon sees a CLI's appends within milliseconds without
// polling the database.
//
// One commit is many writes, and a busy writer in this very process makes
// thousands a second. So after a write the watcher rests for 5 ms without
// reading: the kernel merges the writes that follow into one pending event,
// and a busy ledger costs at most a few hundred cheap wake-ups a second
// instead of one per page written.
//
// A write to the WAL precedes the moment the commit becomes visible (SQLite
// then updates the WAL index in shared memory, which inotify cannot see), so
// a waiter woken by the write itself may look too early. After the last
// write the watcher therefore wakes waiters again 5 ms, 20 ms and 200 ms
// later: cheap (a waiter re-reads one number) and it covers a writer that is
// descheduled between the two steps.
//
// While this process's own writer is busy, hints are not needed at all: each
// of its transactions finds the true head of the log (PRAGMA data_version
// tells it when another process has committed), and the inline
// projection applies whatever other processes appended before it (see
// projections.Projector). So a hint within walRest of this process's last
// commit is dropped; the trailing wake-ups still come once the writer has
// been quiet for walRest.
//
// The doorbell. A write to the WAL is only a hint, and an early one: it
// comes before the commit it belongs to is visible, so on an idle daemon a
// job enqueued by a CLI used to wait for the 5 ms trailing wake-up (more
// when the CLI was descheduled meanwhile). So a process that does not
// project its own appends — a CLI beside a daemon: plugin run, job cancel —
// rings a doorbell once each of its commits is visible: it writes a byte to
// <db>-wake. The watcher follows that file with a watch of its own, read at
// once (no rest: one event per commit), and wakes waiters then. A process
// with a projector (the daemon) never rings: nothing else follows its
// appends that closely, and its busy writer would ring thousands of times a
// second. So a process that projects its own appends takes from the WAL
// only what a writer that does not ring (an older ductile, the sqlite3
// shell) needs: one wake-up 200 ms after the writes stop, no immediate one
// and none at 5 or 20 ms. A process that does not (a CLI waiting for the
// daemon, which never rings) follows the WAL as above.
type walWatcher struct {
	w    *fsnotify.Watcher
	bell *fsnotify.Watcher // nil when the doorbell cannot be watched
	done chan struct{}
}

// doorbellPath is the doorbell of the ledger at dbPath.
func doorbellPath(dbPath string) string { return dbPath + "-wake" }

// SideFiles are the files a ledger at dbPath may keep beside it: SQLite's
// write-ahead log and its shared-memory index, the doorbell and the head
// witness. Whoever removes a ledger file removes these too.
func SideFiles(dbPath string) []string {
	return []string{dbPath + "-wal", dbPath + "-shm", doorbellPath(dbPath), WitnessPath(dbPath)}
}

// openDoorbell opens (creating it if needed) the ledger's doorbell.
func openDoorbell(dbPath string) (*os.File, error) {
	return os.OpenFile(doorbellPath(dbPath), os.O_RDWR|os.O_CREATE, 0o600)
}

// ring tells other processes' watchers that a commit of this process is
// visible.
func ring(bell *os.File) error {
	_, err := bell.WriteAt([]byte{1}, 0)
	return err
}

// walRest is how long the watcher stops reading after a write.
const walRest = 5 * time.Millisecond

// watchWAL starts the watcher. projecting reports whether this process
// projects its own appends (a projector runs in it).
func watchWAL(dbPath string, n *notifier, projecting func() bool, log *slog.Logger) (*walWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	// Watch the directory, not the file: the WAL is removed and recreated
	// when the last connection to the database closes.
	if err := w.Add(filepath.Dir(dbPath)); err != nil {
		w.Close()
		return nil, err
	}
	ww := &walWatcher{w: w, done: make(chan struct{})}
	if bell, err := fsnotify.NewWatcher(); err == nil {
		if err := bell.Add(doorbellPath(dbPath)); err != nil {
			bell.Close() // no doorbell (it could not be created): the WAL still tells
		} else {
			ww.bell = bell
		}
	}
	var rings <-chan fsnotify.Event
	var ringErrs <-chan error
	if ww.bell != nil {
		rings, ringErrs = ww.bell.Events, ww.bell.Errors
	}
	wal := dbPath + "-wal"
	trailing := []time.Duration{walRest, 20 * time.Millisecond, 200 * time.Millisecond}
	// In a process that projects its own appends, the one wake-up that
	// follows WAL writes: other ductile processes ring the doorbell, so only
	// a writer that does not is seen this way.
	insurance := []time.Duration{200 * time.Millisecond}
	go func() {
		defer close(ww.done)
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		schedule := trailing
		step := len(schedule) // no trailing wake-up pending
		var lastPoke time.Time
		wake := func() {
			now := time.Now()
			if now.Sub(time.Unix(0, n.lastCommit.Load())) < walRest {
				return // our own writer is busy; it sees other commits itself
			}
			n.poke()
			lastPoke = now
		}
		events := w.Events // nil while resting
		for {
			select {
			case <-timer.C:
				events = w.Events
				wake()
				if step++; step < len(schedule) {
					timer.Reset(schedule[step] - schedule[step-1])
				}
			case ev, ok := <-events:
				if !ok {
					return
				}
				if ev.Name == wal && ev.Has(fsnotify.Write|fsnotify.Create) {
					schedule = trailing
					if projecting() {
						// Other ductile processes ring: the WAL only has to
						// catch a writer that does not, a while later.
						schedule = insurance
					} else if time.Since(lastPoke) >= walRest {
						wake()
					}
					events = nil
					step = 0
					timer.Reset(schedule[0])
				}
			case ev, ok := <-rings:
				if !ok {
					return
				}
				if ev.Has(fsnotify.Write) {
					n.poke() // another process's commit, visible now
					lastPoke = time.Now()
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("ledger file watch", "err", err)
			case err, ok := <-ringErrs:
				if !ok {
					return
				}
				log.Warn("ledger doorbell watch", "err", err)
			}
		}
	}()
	return ww, nil
}

func (ww *walWatcher) Close() error {
	err := ww.w.Close()
	if ww.bell != nil {
		err = errors.Join(err, ww.bell.Close())
	}
	<-ww.done
	return err
}
