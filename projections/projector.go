package projections

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// checkpointName is the projector's row in projector_checkpoint.
const checkpointName = "main"

// Options tune a Projector.
type Options struct {
	// BatchSize is how many events one transaction applies (default 4096).
	BatchSize int
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Projector applies new events to every projection. Start runs it in the
// background; RunOnce applies one batch (for tests and one-shot commands).
type Projector struct {
	l     *ledger.Ledger
	ps    []Projection
	batch int
	log   *slog.Logger

	mu         sync.Mutex
	checkpoint int64
	seen       map[string]int64         // events applied by this projector, by type
	seenWait   map[string]chan struct{} // closed when an event of the type is applied
	reached    []reachWaiter            // closed once a type's count reaches a threshold
	progress   chan struct{}            // closed and replaced whenever checkpoint moves
	lastErr    error

	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{} // the inline projection fell behind: catch up
}

// New returns a projector for ps over l (Default() when ps is empty).
func New(l *ledger.Ledger, opts Options, ps ...Projection) *Projector {
	if len(ps) == 0 {
		ps = Default()
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 4096
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Projector{
		l:        l,
		ps:       ps,
		batch:    opts.BatchSize,
		log:      opts.Logger.With("component", "projector"),
		progress: make(chan struct{}),
		seen:     map[string]int64{},
		seenWait: map[string]chan struct{}{},
		kick:     make(chan struct{}, 1),
	}
}

// Start makes the projector follow the log. This process's own appends are
// projected inside their append transactions (see inline); a goroutine
// catches up on what that did not cover and on other processes' appends,
// waking on hints that another process wrote. It returns at once; Stop ends it.
func (p *Projector) Start(ctx context.Context) {
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	p.l.SetInlineProjection(p.inline)
	go p.run(ctx)
}

// Stop ends the goroutine Start began and waits for it. A batch in flight
// finishes (it is one transaction) or is rolled back.
func (p *Projector) Stop() {
	if p.cancel == nil {
		return
	}
	p.l.SetInlineProjection(nil)
	p.cancel()
	<-p.done
}

// inline applies a batch of this process's appends inside their own
// transaction. If the projections are behind (other processes' appends not
// yet projected), it first applies those, up to one batch; further behind, it
// leaves everything to the goroutine.
func (p *Projector) inline(conn *sqlite.Conn, appended []ledger.Event) (committed func(), err error) {
	defer func() {
		if err != nil {
			committed = p.wake // rolled back: the goroutine catches up once this commit is in
		}
	}()
	first, last := appended[0].Seq, appended[len(appended)-1].Seq
	lastHash := appended[len(appended)-1].Hash
	types := map[string]int64{}
	observe := func(ev ledger.Event) { types[ev.Type]++ }
	// The usual case: the projections stand right before this batch, as
	// this process last left them. One conditional UPDATE both checks that
	// and moves the checkpoint (and the hash it records) past the batch.
	cp := first - 1
	advanced := false
	if p.Checkpoint() == cp {
		if err := queries.AdvanceCheckpoint(conn, queries.AdvanceCheckpointParams{ToSeq: last, ToHash: lastHash, Name: checkpointName, FromSeq: cp}); err != nil {
			return nil, err
		}
		advanced = conn.Changes() == 1
	}
	if !advanced {
		if cp, err = CheckpointConn(conn); err != nil {
			return nil, err
		}
		if first-1-cp > int64(p.batch) {
			return p.wake, nil // far behind: the goroutine catches up after this commit
		}
		if cp < first-1 {
			if cp, err = apply(conn, p.ps, cp, first-1, observe); err != nil {
				return nil, err
			}
		}
		if last > cp {
			if err := queries.SetCheckpoint(conn, queries.SetCheckpointParams{Name: checkpointName, Seq: last, Hash: lastHash}); err != nil {
				return nil, err
			}
		}
	}
	for len(appended) > 0 && appended[0].Seq <= cp {
		appended = appended[1:]
	}
	if len(appended) > 0 {
		if err := applyPage(conn, p.ps, newPage(appended)); err != nil {
			return nil, err
		}
		for _, ev := range appended {
			observe(ev)
		}
	}
	return func() { p.setResult(max(cp, last), types, nil) }, nil
}

func (p *Projector) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Projector) run(ctx context.Context) {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	// Without a WAL watcher nothing announces other processes' appends: look
	// once a second instead.
	var fallback <-chan time.Time
	if !p.l.Watching() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		fallback = t.C
	}
	for {
		// Take the wake-up channel before looking, so a commit that lands
		// while we apply is never missed. Our own commits are projected
		// inline; only other processes' need this goroutine.
		changed := p.l.External()
		n, err := p.RunOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			p.log.Error("projector batch failed; will retry", "err", err, "checkpoint", p.Checkpoint(), "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		case n == p.batch:
			backoff = 100 * time.Millisecond
			continue // more may be waiting
		}
		backoff = 100 * time.Millisecond
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-p.kick:
		case <-fallback:
		}
	}
}

// RunOnce applies at most one batch of new events and returns how many.
func (p *Projector) RunOnce(ctx context.Context) (int, error) {
	// This process's own commits are known without a query; a read is
	// needed only to learn of other processes' appends.
	if p.l.Head() <= p.Checkpoint() {
		head, err := p.l.LastSeq(ctx)
		if err != nil {
			return 0, err
		}
		if head <= p.Checkpoint() {
			return 0, nil
		}
	}
	var applied int
	var cp int64
	types := map[string]int64{}
	err := p.l.WriteProjections(ctx, func(conn *sqlite.Conn) error {
		clear(types) // a retried transaction starts over
		// The checkpoint and head read here, inside the write transaction,
		// are the truth: another process may have projected since we last
		// looked, and appends queued behind us are in by now.
		var err error
		if cp, err = CheckpointConn(conn); err != nil {
			return err
		}
		head, err := queries.MaxSeq(conn)
		if err != nil {
			return err
		}
		start := cp
		cp, err = apply(conn, p.ps, start, min(head, start+int64(p.batch)), func(ev ledger.Event) { types[ev.Type]++ })
		applied = int(cp - start)
		return err
	})
	p.setResult(cp, types, err)
	if err != nil {
		return 0, err
	}
	return applied, nil
}

func (p *Projector) setResult(cp int64, types map[string]int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = err
	if err == nil {
		for t, n := range types {
			p.seen[t] += n
			if ch, ok := p.seenWait[t]; ok && n > 0 {
				close(ch)
				delete(p.seenWait, t)
			}
		}
		if len(p.reached) > 0 && len(types) > 0 {
			kept := p.reached[:0]
			for _, w := range p.reached {
				if p.seen[w.typ] >= w.n {
					close(w.ch)
					w.stop()
					continue
				}
				kept = append(kept, w)
			}
			p.reached = kept
		}
	}
	if err == nil && cp > p.checkpoint {
		p.checkpoint = cp
		close(p.progress)
		p.progress = make(chan struct{})
	}
}

// pageSize is how many events apply hands the projections at once: a job
// whose events all fall in one page is written once, complete (page.go).
const pageSize = 4096

// apply folds events after < seq <= until into ps, a page at a time, and
// moves the checkpoint (seq and hash of the last event applied), returning
// the new checkpoint. The caller owns the transaction. Events an archive
// holds (a rebuild after ledger archive) are read from its file.
func apply(conn *sqlite.Conn, ps []Projection, after, until int64, observe func(ledger.Event)) (int64, error) {
	last := after
	var lastHash []byte
	buf := make([]ledger.Event, 0, min(pageSize, max(until-after, 0)))
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := applyPage(conn, ps, newPage(buf))
		buf = buf[:0]
		return err
	}
	err := ledger.ReadLog(conn, after, until, func(ev ledger.Event) error {
		if observe != nil {
			observe(ev)
		}
		last, lastHash = ev.Seq, ev.Hash
		buf = append(buf, ev)
		if len(buf) == pageSize {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return after, err
	}
	if last != after {
		if err := queries.SetCheckpoint(conn, queries.SetCheckpointParams{Name: checkpointName, Seq: last, Hash: lastHash}); err != nil {
			return after, fmt.Errorf("move checkpoint to %d: %w", last, err)
		}
	}
	return last, nil
}

// CheckpointConn reads the projector's checkpoint on conn, inside whatever
// read transaction the caller holds (0 before any projection).
func CheckpointConn(conn *sqlite.Conn) (int64, error) {
	seq, err := queries.GetCheckpoint(conn, checkpointName)
	if errors.Is(err, queries.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read checkpoint: %w", err)
	}
	return seq, nil
}

// Checkpoint is the seq of the last event applied (as far as this process knows).
func (p *Projector) Checkpoint() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkpoint
}

// Seen is how many events of type typ this projector has applied since it
// was created: a cheap way for a consumer to learn that something it cares
// about happened (the dispatcher watches job.cancel_requested).
func (p *Projector) Seen(typ string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[typ]
}

// A reachWaiter is a Reached call waiting for its count.
type reachWaiter struct {
	typ  string
	n    int64
	ch   chan struct{}
	stop func() bool // drops the context's hook once the count is reached
}

// Reached returns a channel closed once this projector has applied at
// least n events of type typ (at once if it already has): a wait for a
// count that costs nothing per commit. The wait is dropped when ctx ends.
func (p *Projector) Reached(ctx context.Context, typ string, n int64) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.seen[typ] >= n {
		close(ch)
		return ch
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.reached = slices.DeleteFunc(p.reached, func(w reachWaiter) bool { return w.ch == ch })
	})
	p.reached = append(p.reached, reachWaiter{typ: typ, n: n, ch: ch, stop: stop})
	return ch
}

// SeenChanged returns a channel closed the next time this projector applies
// an event of type typ: for a consumer that cares about one type only and
// should not wake at every commit.
func (p *Projector) SeenChanged(typ string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.seenWait[typ]
	if !ok {
		ch = make(chan struct{})
		p.seenWait[typ] = ch
	}
	return ch
}

// Progressed returns a channel closed the next time the checkpoint moves.
func (p *Projector) Progressed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.progress
}

// WaitFor blocks until every event up to seq has been projected.
func (p *Projector) WaitFor(ctx context.Context, seq int64) error {
	for {
		ch := p.Progressed()
		if p.Checkpoint() >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Lag is how far the projections trail the log.
type Lag struct {
	Checkpoint int64  `json:"checkpoint"`
	Head       int64  `json:"head"`
	Events     int64  `json:"events"`
	LastError  string `json:"last_error,omitempty"`
}

// Lag reads the log's head and compares it with the checkpoint.
func (p *Projector) Lag(ctx context.Context) (Lag, error) {
	head, err := p.l.LastSeq(ctx)
	if err != nil {
		return Lag{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lag := Lag{Checkpoint: p.checkpoint, Head: head, Events: head - p.checkpoint}
	if p.lastErr != nil {
		lag.LastError = p.lastErr.Error()
	}
	return lag, nil
}

// ReadCheckpoint reads the stored checkpoint through a read connection.
func ReadCheckpoint(ctx context.Context, l *ledger.Ledger) (seq int64, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		seq, err = CheckpointConn(conn)
		return err
	})
	return seq, err
}

// Rebuild empties every projection and replays the log up to until (0: all
// of it) in one transaction, returning the new checkpoint.
func Rebuild(ctx context.Context, l *ledger.Ledger, until int64, ps ...Projection) (int64, error) {
	if len(ps) == 0 {
		ps = Default()
	}
	var cp int64
	err := l.WriteProjections(ctx, func(conn *sqlite.Conn) error {
		to := until
		if to <= 0 {
			// The whole log, read inside the transaction: nothing appended
			// meanwhile can be left out behind the checkpoint.
			var err error
			if to, err = queries.MaxSeq(conn); err != nil {
				return err
			}
		}
		restore, err := setCacheSize(conn, rebuildCacheKiB)
		if err != nil {
			return err
		}
		defer restore()
		for _, pr := range ps {
			if err := wrap(pr, "reset", pr.Reset(conn)); err != nil {
				return err
			}
		}
		if err := queries.DeleteCheckpoints(conn); err != nil {
			return err
		}
		cp, err = apply(conn, ps, 0, to, nil)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("rebuild projections: %w", err)
	}
	return cp, nil
}

// rebuildCacheKiB is the page cache a rebuild works with. A rebuild reads
// each page of the log once and fills the projections' last pages in
// order: a few dozen pages are its working set. A larger cache only costs
// allocating its pages and, when the connection closes, freeing them, which
// modernc's allocator does page by page (ledger replay: 30% less CPU with
// 256 KiB than with the connections' 16 MiB).
const rebuildCacheKiB = 256

// setCacheSize sets conn's page cache to kib KiB and returns what sets it
// back.
func setCacheSize(conn *sqlite.Conn, kib int) (restore func(), err error) {
	var was int64
	err = sqlitex.ExecuteTransient(conn, "PRAGMA cache_size;", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { was = stmt.ColumnInt64(0); return nil },
	})
	if err == nil {
		err = sqlitex.ExecuteTransient(conn, fmt.Sprintf("PRAGMA cache_size = %d;", -kib), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("set the page cache: %w", err)
	}
	return func() { _ = sqlitex.ExecuteTransient(conn, fmt.Sprintf("PRAGMA cache_size = %d;", was), nil) }, nil
}

// Dump writes the checkpoint and then every projection's rows, in one read
// snapshot: two dumps of the same log position are byte-identical.
func Dump(ctx context.Context, l *ledger.Ledger, w io.Writer, ps ...Projection) (checkpoint int64, err error) {
	if len(ps) == 0 {
		ps = Default()
	}
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		if checkpoint, err = CheckpointConn(conn); err != nil {
			return err
		}
		for _, pr := range ps {
			if _, err := fmt.Fprintf(w, "## %s\n", pr.Name()); err != nil {
				return err
			}
			if err := wrap(pr, "dump", pr.Dump(conn, w)); err != nil {
				return err
			}
		}
		return nil
	})
	return checkpoint, err
}

// CatchUp applies batches until the projections reach the log's head as it
// was when called, and returns the checkpoint.
func (p *Projector) CatchUp(ctx context.Context) (int64, error) {
	for {
		n, err := p.RunOnce(ctx)
		if err != nil {
			return p.Checkpoint(), err
		}
		if n == 0 {
			return p.Checkpoint(), nil
		}
	}
}
