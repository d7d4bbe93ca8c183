package projections

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

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
