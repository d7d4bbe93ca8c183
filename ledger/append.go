package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/queries"
)

// A request is one unit of work for the writer goroutine: either an append
// (decide), batched with others, or a transaction of its own (exclusive).
// A relaxed request is answered once committed; any other, once the syncer
// has made its commit durable (see sync.go).
type request struct {
	ctx       context.Context
	decide    func(tx *Tx) ([]NewEvent, error)
	exclusive func(conn *sqlite.Conn) error
	relaxed   bool

	seqs    []int64
	err     error
	folds   []stagedFold // left by decide, cached once committed
	newHead *chainHead   // an exclusive request that appended (Import): the chain's new head
	done    chan struct{}
}

// Tx is what a decision sees inside the write transaction: the streams as
// they are at that instant, including events appended earlier in the same batch.
type Tx struct {
	conn *sqlite.Conn
	// versions remembers the streams this decision has read, so appending
	// to them needs no second look (nothing else writes during a decision).
	versions map[string]int64
	folds    *foldCache   // the writer's (fold.go)
	loaded   []loadedFold // the states this decision read with Fold
	// oldSchema: the file may predate archives (Options.SkipMigrate).
	oldSchema bool
}

func (tx *Tx) remember(stream string, version int64) {
	if tx.versions == nil {
		tx.versions = map[string]int64{}
	}
	tx.versions[stream] = version
}

// StreamVersion is the stream's current version (0 if it has no events).
func (tx *Tx) StreamVersion(stream string) (int64, error) {
	if v, ok := tx.versions[stream]; ok {
		return v, nil
	}
	if v, ok := tx.folds.version(stream); ok {
		tx.remember(stream, v)
		return v, nil
	}
	v, err := streamVersion(tx.conn, stream, !tx.oldSchema)
	if err == nil {
		tx.remember(stream, v)
	}
	return v, err
}

// streamVersion is the newest version of a stream: of its newest event, or
// if none is left in the file, the newest one archived (archive.go).
func streamVersion(conn *sqlite.Conn, stream string, archived bool) (int64, error) {
	var v int64
	found := false
	err := queries.StreamVersion(conn, stream, func(version int64) error { v, found = version, true; return nil })
	if err != nil || found || !archived {
		return v, err
	}
	err = queries.ArchivedStreamVersion(conn, stream, func(version int64) error { v = version; return nil })
	return v, err
}

// ReadStream returns the stream's events, oldest first.
func (tx *Tx) ReadStream(stream string) ([]Event, error) {
	evs, err := readStream(tx.conn, stream)
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 {
		tx.remember(stream, evs[len(evs)-1].Version)
		return evs, nil
	}
	delete(tx.versions, stream)
	_, err = tx.StreamVersion(stream) // it may have archived events
	return evs, err
}

// Append appends events atomically (all or none), durably, and returns
// their seqs: Decide for events whose expected versions the caller already
// knows. A stale ExpectedVersion fails with an error wrapping
// ErrVersionConflict.
func (l *Ledger) Append(ctx context.Context, events ...NewEvent) ([]int64, error) {
	return l.Decide(ctx, Durable, func(*Tx) ([]NewEvent, error) { return events, nil })
}

// Durability says when an append may return.
type Durability int

const (
	// Durable appends return once fsynced (synchronous=FULL by default).
	Durable Durability = iota
	// Relaxed appends return once committed, without waiting for an fsync:
	// a process crash cannot lose them (the WAL is written); a power cut
	// within RelaxedSyncDelay (10 ms) of the commit can, since the syncer
	// flushes them that long after (sooner if a durable append's flush comes
	// first; the WAL is sequential, so no durable event ever outlives an
	// earlier relaxed one). For events whose loss only means work is redone
	// under at-least-once delivery: a job's start, an attempt's outcome.
	Relaxed
)

// Decide runs decide inside the write transaction and appends what it
// returns, atomically, and returns once the append is as durable as d asks.
// decide reads streams through tx and must be quick and free of other I/O:
// it runs on the single writer goroutine. If decide fails, nothing of this
// call is appended and its error is returned; other callers sharing the
// batch are unaffected. Decide may return no events.
//
// Decisions that arrive together share one transaction (group commit):
// callers that append at the same moment from several goroutines (a worker
// recording one job's outcome while the next job's start is recorded) pay
// for one commit.
func (l *Ledger) Decide(ctx context.Context, d Durability, decide func(tx *Tx) ([]NewEvent, error)) ([]int64, error) {
	return l.queueDecision(ctx, d, decide).wait()
}

// DecideEach is Decide for several independent decisions made at the same
// moment: it queues them back to back, in order, so that they share one
// transaction, and answers each as Decide would — a decision that fails
// appends nothing and leaves the others be. It returns when every one is
// answered.
func (l *Ledger) DecideEach(ctx context.Context, d Durability, decisions ...func(tx *Tx) ([]NewEvent, error)) ([][]int64, []error) {
	queued := make([]*pending, len(decisions))
	for i, decide := range decisions {
		queued[i] = l.queueDecision(ctx, d, decide)
	}
	seqs, errs := make([][]int64, len(decisions)), make([]error, len(decisions))
	for i, p := range queued {
		seqs[i], errs[i] = p.wait()
	}
	return seqs, errs
}

// pending is a decision queued for the writer, its answer still to come.
type pending struct {
	r   *request
	err error // the request could not be queued
}

// queueDecision queues decide for the writer and returns at once; wait gives
// the answer.
func (l *Ledger) queueDecision(ctx context.Context, d Durability, decide func(tx *Tx) ([]NewEvent, error)) *pending {
	r := &request{ctx: ctx, decide: decide, relaxed: d == Relaxed, done: make(chan struct{})}
	return &pending{r: r, err: l.enqueue(r)}
}

// wait blocks until the append is answered (committed, and flushed if
// durable) and returns its seqs.
func (p *pending) wait() ([]int64, error) {
	if p.err != nil {
		return nil, p.err
	}
	// Once queued, the request is always answered: waiting for the answer
	// (rather than giving up on ctx) means a caller never mistakes a durable
	// append for a failed one.
	<-p.r.done
	return p.r.seqs, p.r.err
}

// WriteProjections runs fn in its own IMMEDIATE transaction on the writer
// connection, committed with synchronous=NORMAL: projections are rebuildable
// from the log, so they need not pay for an fsync of their own (the next
// durable append syncs them too). Only the projector calls this.
func (l *Ledger) WriteProjections(ctx context.Context, fn func(conn *sqlite.Conn) error) error {
	r := &request{ctx: ctx, exclusive: fn, relaxed: true, done: make(chan struct{})}
	if err := l.submit(r); err != nil {
		return err
	}
	return r.err
}

// Import appends events copied verbatim from another ledger (same seqs,
// versions, times and hashes), checking that each one continues this
// ledger's hash chain and hashes to what it carries. It is how a copy of the
// log as of some point is made (ledger replay --out).
func (l *Ledger) Import(ctx context.Context, events []Event) error {
	r := &request{ctx: ctx, done: make(chan struct{})}
	r.exclusive = func(conn *sqlite.Conn) error {
		head, err := readHead(conn)
		if err != nil {
			return err
		}
		for _, ev := range events {
			if problem := head.link(ev); problem != "" {
				return fmt.Errorf("import event %d: %s", ev.Seq, problem)
			}
			err := queries.InsertEvent(conn, queries.InsertEventParams{
				Seq: ev.Seq, Stream: ev.Stream, Version: ev.Version, Type: ev.Type,
				Data: string(ev.Data), Meta: string(ev.Meta), RecordedAt: ev.recordedAt,
				PrevHash: ev.PrevHash, Hash: ev.Hash,
			})
			if err != nil {
				return fmt.Errorf("import event %d: %w", ev.Seq, err)
			}
			head = chainHead{seq: ev.Seq, hash: ev.Hash}
		}
		r.seqs = []int64{head.seq} // announced once committed
		r.newHead = &head
		return nil
	}
	if err := l.submit(r); err != nil {
		return err
	}
	return r.err
}

// submit queues r and waits for its answer.
func (l *Ledger) submit(r *request) error {
	if err := l.enqueue(r); err != nil {
		return err
	}
	<-r.done // always answered once queued (see pending.wait)
	return nil
}

// enqueue hands r to the writer goroutine.
func (l *Ledger) enqueue(r *request) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if l.opts.ReadOnly {
		return ErrReadOnly
	}
	if p := l.syncer.failed.Load(); p != nil {
		return fmt.Errorf("%w: %v", ErrNotDurable, *p)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	l.reqs <- r
	return nil
}

// writeLoop owns the writer connection. It takes the first waiting request,
// then everything else already queued, and commits them together.
func (l *Ledger) writeLoop() {
	defer close(l.done)
	var held *request
	for {
		first := held
		held = nil
		if first == nil {
			var ok bool
			if first, ok = <-l.reqs; !ok {
				return
			}
		}
		l.syncer.writerBusy.Store(true)
		if first.exclusive != nil {
			l.runExclusive(first)
			l.syncer.writerBusy.Store(len(l.reqs) > 0)
			continue
		}
		batch := []*request{first}
		// Let goroutines that are about to submit (a worker recording one
		// job's outcome while another starts the next) do so before the
		// batch is sealed: one transaction then holds both. With nothing
		// else runnable this returns at once.
		runtime.Gosched()
	drain:
		for len(batch) < l.opts.MaxBatch {
			select {
			case r, ok := <-l.reqs:
				if !ok {
					break drain
				}
				if r.exclusive != nil {
					held = r
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		l.commitBatch(batch)
		l.syncer.writerBusy.Store(held != nil || len(l.reqs) > 0)
	}
}

type chainHead struct {
	seq  int64
	hash []byte
}

// writerView is what the writer knows of the file after its last batch
// (writer goroutine only). While PRAGMA data_version is unchanged, no other
// connection has committed since: head is the chain's head, and the folds
// cached in the current epoch are at their streams' versions (fold.go), so
// the next batch reads neither. Each look costs a query per batch and one
// per stream a decision folds; data_version, one that reads no table.
type writerView struct {
	valid       bool
	dataVersion int64
	head        chainHead
}

// dataVersion is PRAGMA data_version: it changes when another connection
// (of any process) commits, never for this connection's own commits.
func dataVersion(conn *sqlite.Conn) (int64, error) {
	stmt, err := conn.Prepare("PRAGMA data_version;")
	if err != nil {
		return 0, fmt.Errorf("read data_version: %w", err)
	}
	defer stmt.Reset()
	ok, err := stmt.Step()
	if err != nil {
		return 0, fmt.Errorf("read data_version: %w", err)
	}
	if !ok {
		return 0, errors.New("read data_version: no row")
	}
	return stmt.ColumnInt64(0), nil
}

// commitBatch applies each request in its own savepoint within one IMMEDIATE
// transaction, then commits once.
func (l *Ledger) commitBatch(batch []*request) {
	conn := l.writer
	var lastSeq int64
	var newHead chainHead
	var committed func() // the inline projection's, run once the batch is in
	var view writerView  // the file as this transaction leaves it
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("append: panic: %v", p)
			}
		}()
		end, err := sqlitex.ImmediateTransaction(conn)
		if err != nil {
			return fmt.Errorf("append: begin: %w", err)
		}
		defer end(&err)
		dv, err := dataVersion(conn)
		if err != nil {
			return err
		}
		trusted := l.view.valid && dv == l.view.dataVersion
		head := l.view.head
		if !trusted {
			if head, err = readHead(conn); err != nil {
				return err
			}
		}
		l.folds.begin(trusted)
		defer l.folds.end()
		view = writerView{valid: true, dataVersion: dv}
		nowTime := l.opts.Now().UTC()
		now := nowTime.Format(TimeFormat)
		var appended []Event
		for _, r := range batch {
			if err := r.ctx.Err(); err != nil {
				r.err = err
				continue
			}
			isolated := len(batch) > 1
			next, stored, rerr := l.applyOne(conn, r, head, now, isolated)
			if !isolated && rerr != nil {
				return rerr // the transaction holds nothing else: roll it back
			}
			if conn.AutocommitEnabled() {
				// SQLite rolled the whole transaction back (I/O error, disk
				// full…): nothing in this batch is in, so all of it fails.
				if rerr == nil {
					rerr = errRolledBack
				}
				return fmt.Errorf("append: %w", rerr)
			}
			if rerr != nil {
				r.err = rerr
				continue
			}
			r.seqs = make([]int64, len(stored))
			for i := range stored {
				stored[i].RecordedAt = nowTime
				r.seqs[i] = stored[i].Seq
			}
			appended = append(appended, stored...)
			head = next
		}
		view.head = head
		if len(appended) > 0 {
			lastSeq, newHead = head.seq, head // else nothing was appended: no commit to announce
		}
		if committed, err = l.projectInline(conn, appended); err != nil {
			return err
		}
		if l.opts.BeforeCommit != nil && len(appended) > 0 {
			l.opts.BeforeCommit(appended)
		}
		return nil
	}()
	if err != nil {
		view = writerView{} // rolled back, or the commit is in doubt: look again
	}
	l.view = view
	l.noteBatch(err, batch, lastSeq > 0)
	for _, r := range batch {
		if err != nil {
			r.seqs, r.err = nil, err
		}
		if r.err == nil {
			l.folds.keep(r.folds)
		}
		r.folds = nil
	}
	if err == nil && lastSeq > 0 {
		l.committed.Store(&newHead)
		l.stats.commits.Add(1)
		if committed != nil {
			committed()
		}
		l.notify.committed(lastSeq)
		if l.bell != nil && !l.projecting() {
			// Nothing in this process projects these appends: tell whoever
			// does (the daemon), now that they are visible.
			_ = ring(l.bell)
		}
	}
	l.release(batch)
}

// InlineProjection is run by the writer inside each append transaction,
// after the batch's events are in, with those events (oldest first). It may
// write the projection tables on conn and returns a function the writer
// calls once the transaction has committed.
type InlineProjection func(conn *sqlite.Conn, appended []Event) (committed func(), err error)

// projecting reports whether a projector follows this process's appends
// inline.
func (l *Ledger) projecting() bool {
	fn := l.inline.Load()
	return fn != nil && *fn != nil
}

// SetInlineProjection installs (or, with nil, removes) the inline projection.
// Only the projector calls it: projections then follow this process's
// appends in the same transaction, with no second transaction and no re-read.
func (l *Ledger) SetInlineProjection(fn InlineProjection) {
	l.inline.Store(&fn)
}

// projectInline runs the inline projection in a savepoint: if it fails, what
// it wrote is rolled back and the appends still commit (the projector
// goroutine catches up later). Only a transaction lost as a whole fails the batch.
func (l *Ledger) projectInline(conn *sqlite.Conn, appended []Event) (committed func(), err error) {
	fn := l.inline.Load()
	if fn == nil || *fn == nil || len(appended) == 0 {
		return nil, nil
	}
	perr := withSavepoint(conn, inlineSavepoint, func() (err error) {
		committed, err = (*fn)(conn, appended)
		return err
	})
	if conn.AutocommitEnabled() {
		return nil, fmt.Errorf("append: inline projection: transaction rolled back: %w", perr)
	}
	if perr != nil {
		// What it wrote is undone; committed (if any) still runs after the
		// commit, so the projector's goroutine wakes to catch up then.
		l.log.Warn("inline projection failed; the projector will catch up", "err", perr)
	}
	return committed, nil
}

// applyOne runs one request's decision and inserts its events, returning
// the new chain head. Among other callers (isolated), a request of several
// events gets a savepoint, so a
// failure undoes only its own events. A single event needs none: a failed
// INSERT is undone by SQLite's statement atomicity, and the decision only
// read. A batch of one needs none either: its failure rolls back the
// transaction, which holds nothing else.
func (l *Ledger) applyOne(conn *sqlite.Conn, r *request, head chainHead, now string, isolated bool) (next chainHead, stored []Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("append: decision panicked: %v", p)
		}
	}()
	tx := &Tx{conn: conn, folds: &l.folds, oldSchema: l.opts.SkipMigrate}
	events, err := r.decide(tx)
	if err != nil {
		return head, nil, err
	}
	next, stored = head, make([]Event, 0, len(events))
	insert := func() error {
		for i, ev := range events {
			var e Event
			var err error
			if next, e, err = insertEvent(tx, next, ev, now); err != nil {
				return fmt.Errorf("append event %d (%s %s): %w", i, ev.Stream, ev.Type, err)
			}
			stored = append(stored, e)
		}
		return nil
	}
	if isolated && len(events) > 1 {
		err = withSavepoint(conn, callerSavepoint, insert)
	} else {
		err = insert()
	}
	if err != nil {
		return head, nil, err
	}
	r.folds = tx.stage(stored)
	return next, stored, nil
}

// The savepoints the writer uses, each statement prepared once per
// connection (sqlitex.Save names every savepoint after its caller, found
// through runtime.Callers, at a cost on every commit).
type savepoint struct{ open, release, rollback string }

var (
	callerSavepoint = savepoint{"SAVEPOINT caller;", "RELEASE caller;", "ROLLBACK TO caller;"}
	inlineSavepoint = savepoint{"SAVEPOINT inline;", "RELEASE inline;", "ROLLBACK TO inline;"}
)

// withSavepoint runs fn inside sp: if fn fails or panics, what it wrote is
// undone and the rest of the transaction stands. If SQLite rolled the whole
// transaction back meanwhile (an I/O error…), there is nothing to undo and
// the caller finds the connection in autocommit mode.
func withSavepoint(conn *sqlite.Conn, sp savepoint, fn func() error) (err error) {
	if err := sqlitex.Execute(conn, sp.open, nil); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v", p)
		}
		if conn.AutocommitEnabled() {
			return
		}
		if err == nil {
			err = sqlitex.Execute(conn, sp.release, nil)
			return
		}
		if rerr := errors.Join(sqlitex.Execute(conn, sp.rollback, nil), sqlitex.Execute(conn, sp.release, nil)); rerr != nil {
			err = fmt.Errorf("%w (and undoing it failed: %v)", err, rerr)
		}
	}()
	return fn()
}

func insertEvent(tx *Tx, head chainHead, ev NewEvent, now string) (chainHead, Event, error) {
	conn := tx.conn
	if ev.Stream == "" {
		return head, Event{}, fmt.Errorf("%w: empty stream", ErrInvalidEvent)
	}
	if ev.Type == "" {
		return head, Event{}, fmt.Errorf("%w: empty type", ErrInvalidEvent)
	}
	if ev.ExpectedVersion < AnyVersion {
		return head, Event{}, fmt.Errorf("%w: expected version %d", ErrInvalidEvent, ev.ExpectedVersion)
	}
	data, err := encodeData(ev.Data)
	if err != nil {
		return head, Event{}, err
	}
	meta, err := json.Marshal(ev.Meta)
	if err != nil {
		return head, Event{}, fmt.Errorf("%w: meta: %v", ErrInvalidEvent, err)
	}
	// With an expected version, the database checks it: UNIQUE(stream,
	// version) refuses a repeat and a trigger refuses a gap, so the common
	// case costs no lookup. A version the decision has read is checked here.
	current := ev.ExpectedVersion
	known, isKnown := tx.versions[ev.Stream]
	if ev.ExpectedVersion == AnyVersion || isKnown {
		if current, err = tx.StreamVersion(ev.Stream); err != nil {
			return head, Event{}, err
		}
		if isKnown && ev.ExpectedVersion != AnyVersion && ev.ExpectedVersion != known {
			return head, Event{}, &VersionConflictError{Stream: ev.Stream, Expected: ev.ExpectedVersion, Actual: known}
		}
	}
	next := chainHead{seq: head.seq + 1}
	next.hash = chainHash(head.hash, next.seq, ev.Stream, current+1, ev.Type, data, string(meta), now)
	err = queries.InsertEvent(conn, queries.InsertEventParams{
		Seq:        next.seq,
		Stream:     ev.Stream,
		Version:    current + 1,
		Type:       ev.Type,
		Data:       data,
		Meta:       string(meta),
		RecordedAt: now,
		PrevHash:   head.hash,
		Hash:       next.hash,
	})
	if err != nil {
		if c := sqlite.ErrCode(err); c == sqlite.ResultConstraintUnique || c == sqlite.ResultConstraintTrigger {
			// The expected version was stale: say what the stream holds.
			// If it was not (another trigger refused the event), the
			// refusal itself is the error.
			delete(tx.versions, ev.Stream)
			if actual, verr := tx.StreamVersion(ev.Stream); verr == nil && actual != current {
				return head, Event{}, &VersionConflictError{Stream: ev.Stream, Expected: ev.ExpectedVersion, Actual: actual}
			}
		}
		return head, Event{}, err
	}
	tx.remember(ev.Stream, current+1)
	tx.folds.touch(ev.Stream)
	return next, Event{
		Seq: next.seq, Stream: ev.Stream, Version: current + 1, Type: ev.Type,
		Data: []byte(data), Meta: meta, PrevHash: head.hash, Hash: next.hash, recordedAt: now, meta: decodedMeta(ev.Meta),
	}, nil
}

func readHead(conn *sqlite.Conn) (chainHead, error) {
	row, err := queries.LedgerHead(conn)
	if errors.Is(err, queries.ErrNoRows) {
		return chainHead{seq: 0, hash: genesis}, nil
	}
	if err != nil {
		return chainHead{}, fmt.Errorf("read ledger head: %w", err)
	}
	return chainHead{seq: row.Seq, hash: row.Hash}, nil
}

// runExclusive runs a request in a transaction of its own.
func (l *Ledger) runExclusive(r *request) {
	defer l.release([]*request{r})
	// It may change the file behind the writer's view (Import appends,
	// an archive removes events): the next batch looks again.
	l.view = writerView{}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return
	}
	conn := l.writer
	r.err = func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("write: panic: %v", p)
			}
		}()
		end, err := sqlitex.ImmediateTransaction(conn)
		if err != nil {
			return fmt.Errorf("write: begin: %w", err)
		}
		defer end(&err)
		return r.exclusive(conn)
	}()
	l.noteWrite(r.err)
	if r.err == nil && r.newHead != nil {
		l.committed.Store(r.newHead)
	}
	switch {
	case r.err == nil && len(r.seqs) > 0:
		l.notify.committed(r.seqs[len(r.seqs)-1])
	case r.err == nil:
		// A commit of projections only (the projector's catch-up): its WAL
		// writes are this process's, not a hint of another's commit.
		l.notify.lastCommit.Store(time.Now().UnixNano())
	}
}

// LastEvent returns the stream's newest event, and false if it has none.
func (tx *Tx) LastEvent(stream string) (ev Event, ok bool, err error) {
	err = queries.ReadStreamLast(tx.conn, stream, func(r queries.ReadStreamLastRow) error {
		ev, ok = eventFromRow(queries.ReadStreamRow(r)), true
		return nil
	})
	return ev, ok, err
}
