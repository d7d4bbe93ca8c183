package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/router"
)

// Options configure a Dispatcher.
type Options struct {
	Ledger    *ledger.Ledger
	Projector *projections.Projector
	Config    *config.Config
	Plugins   *pluginhost.Registry
	Logger    *slog.Logger
	// MaxWorkers overrides config service.max_workers.
	MaxWorkers int
	// Grace between SIGTERM and SIGKILL of a plugin (default 5s).
	Grace time.Duration
	// DrainTimeout is how long Stop lets running jobs finish before
	// interrupting them (default 10s).
	DrainTimeout time.Duration
	Now          func() time.Time
}

// Dispatcher runs queued jobs. Start runs it; Stop drains it.
type Dispatcher struct {
	opts Options
	log  *slog.Logger
	max  int

	mu       sync.Mutex
	running  map[string]*run            // jobs we own: starting, running, or recording their outcome
	settling map[string]int64           // finished jobs → seq the projector must pass before we look at them again
	procs    int                        // plugin processes we run (worker slots in use)
	perPlug  map[string]int             // processes per plugin, for parallelism caps
	configs  map[string]json.RawMessage // plugin configs as JSON, encoded once

	// The candidate cache: what the projection said was queued at our last
	// read. It is read again only when the projector has applied something
	// that can add candidates, or when it ran dry.
	ready         []candidate // queued, not waiting for a retry, oldest first
	retries       []candidate // queued, waiting for a retry
	truncated     bool        // ready was cut at the read limit
	dry           bool        // free workers but nothing eligible in a truncated cache
	cacheGen      int64       // requeue events applied when the cache was read
	cacheEnqueued int64       // job.enqueued events applied when the cache was read
	cacheCapped   string      // the capped plugins the cache was read without (JSON)
	cancelsSeen   int64       // job.cancel_requested events applied at our last look

	// Starts the ledger refused for now (busy, disk full…): nothing starts
	// before startPausedUntil, a pause that doubles with each refusal (from
	// MinStartPause up to MaxStartPause) and ends with the next start
	// recorded. startPaused mirrors "a pause is set" for the lock-free check
	// of every start.
	startPause       time.Duration
	startPausedUntil time.Time
	startPaused      atomic.Bool
	startsRefused    atomic.Int64
	startFailures    repeatedFailure

	freed   chan struct{}
	loopCtx context.Context // the dispatch loop's (guarded by mu); nil when only RunJob runs jobs
	cancel  context.CancelFunc
	done    chan struct{}
	wg      sync.WaitGroup
	runCtx  context.Context // parent of worker contexts; outlives Stop's first phase
	stopRn  context.CancelFunc
}

type run struct {
	candidate
	active bool // its plugin process is running
	cancel context.CancelCauseFunc
}

type candidate struct {
	id, plugin, command, dedupeKey string
	seq                            int64
	retryAt                        time.Time
}

// requeueEvents put a job back in the queue at its old place in FIFO order,
// so they can add a candidate anywhere in the queue; a new job.enqueued only
// ever adds one after every job already queued.
var requeueEvents = []string{events.JobRetryScheduled, events.JobRecovered}

// Start pauses: after a start the ledger refused for now, nothing starts
// for MinStartPause, doubled at each further refusal up to MaxStartPause.
// A failed start spawns a plugin process and kills it: without the pause a
// full disk made the daemon do that about 1,000 times a second.
const (
	MinStartPause = 100 * time.Millisecond
	MaxStartPause = 30 * time.Second
)

// startFailureWindow is how often a run of refused starts is logged.
const startFailureWindow = 30 * time.Second

var (
	errCanceledByUser = errors.New("canceled by request")
	errShutdown       = errors.New("the daemon is shutting down")
)

// New returns a dispatcher.
func New(opts Options) *Dispatcher {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Grace <= 0 {
		opts.Grace = pluginhost.DefaultGrace
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	max := opts.MaxWorkers
	if max <= 0 {
		max = opts.Config.Service.MaxWorkers
	}
	if max <= 0 {
		max = 1
	}
	runCtx, stopRn := context.WithCancel(context.Background())
	return &Dispatcher{
		runCtx:   runCtx,
		stopRn:   stopRn,
		opts:     opts,
		log:      opts.Logger.With("component", "dispatcher"),
		max:      max,
		running:  map[string]*run{},
		settling: map[string]int64{},
		perPlug:  map[string]int{},
		configs:  map[string]json.RawMessage{},
		freed:    make(chan struct{}, 1),
		cacheGen: -1,
		startFailures: repeatedFailure{
			msg: "could not record a job's start; no job starts until the pause is over", window: startFailureWindow,
		},
	}
}

// Start runs the dispatch loop in the background and returns at once.
func (d *Dispatcher) Start(ctx context.Context) {
	ctx, d.cancel = context.WithCancel(ctx)
	d.mu.Lock()
	d.loopCtx = ctx
	d.mu.Unlock()
	d.done = make(chan struct{})
	go d.loop(ctx)
}

// Stop stops starting jobs, gives running ones DrainTimeout to finish, then
// interrupts the rest (their attempt is recorded as interrupted and retried
// later), and waits for every worker to record its outcome.
func (d *Dispatcher) Stop() {
	defer d.stopRn()
	if d.cancel == nil {
		return
	}
	d.cancel()
	<-d.done
	finished := make(chan struct{})
	go func() { d.wg.Wait(); close(finished) }()
	t := time.NewTimer(d.opts.DrainTimeout)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		d.log.Warn("interrupting jobs still running at shutdown", "jobs", d.Running())
		d.mu.Lock()
		for _, r := range d.running {
			r.cancel(errShutdown)
		}
		d.mu.Unlock()
		// An interrupted job's worker still records its outcome, retrying
		// while the ledger refuses. If it refuses for as long again (a held
		// write lock, a failed disk), stop trying: recovery at the next start
		// runs the job again.
		t.Reset(d.opts.DrainTimeout)
		select {
		case <-finished:
		case <-t.C:
			d.log.Error("giving up recording the outcomes of interrupted jobs; recovery will run them again", "jobs", d.Running())
			d.stopRn()
			<-finished
		}
	}
}

// RunJob runs one job in the calling goroutine until it is terminal,
// retries included (waiting for each retry's time), without the dispatch
// loop: what plugin run does when no daemon is running. The caller holds the
// state directory's lock, so nothing else runs the job. Canceling ctx
// cancels the job, with ctx's cause as the reason recorded when it has one.
func (d *Dispatcher) RunJob(ctx context.Context, id string) error {
	read := context.WithoutCancel(ctx) // a canceled ctx still ends the job
	// why is the reason a job canceled before its attempt started records.
	why := func() string {
		if cause := context.Cause(ctx); cause != context.Canceled {
			return cause.Error()
		}
		return "interrupted"
	}
	for {
		changed := d.opts.Ledger.Changed()
		evs, err := d.opts.Ledger.ReadStream(read, events.JobStream(id))
		if err != nil {
			return err
		}
		j, err := commands.FoldJob(evs)
		if err != nil {
			return fmt.Errorf("run job %s: %w", id, err)
		}
		if j.Terminal() {
			return nil
		}
		if j.Status != events.StatusQueued {
			return fmt.Errorf("run job %s: it is %s elsewhere", id, j.Status)
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), d.cancelQueued(read, id, why()))
		}
		if wait := j.NextRetryAt.Sub(d.opts.Now()); wait > 0 {
			d.log.Info("waiting for the retry", "job_id", id, "attempt", j.Attempt, "next_retry_at", commands.Time(j.NextRetryAt))
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(ctx.Err(), d.cancelQueued(read, id, why()+" while waiting for a retry"))
			case <-changed:
				t.Stop()
				continue // look again: canceled from elsewhere?
			case <-t.C:
			}
		}
		c := candidate{id: id, plugin: j.Plugin, command: j.Command, dedupeKey: j.DedupeKey, seq: 0}
		d.mu.Lock()
		rctx, cancel := d.claimLocked(c)
		d.mu.Unlock()
		stop := context.AfterFunc(ctx, func() { cancel(cancelCause(ctx)) })
		watched := make(chan struct{})
		go d.watchCancel(rctx, id, cancel, watched)
		err = d.work(rctx, c, nil)
		stop()
		cancel(nil)
		<-watched
		if refusedForNow(err) {
			// Not started, the ledger refused for now (busy, full…): wait
			// for the pause that set. Otherwise (canceled, or started
			// elsewhere) look again.
			t := time.NewTimer(d.startPauseLeft())
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
}

// cancelQueued cancels a queued job RunJob will not start, for reason; one
// that ended meanwhile is left as it is.
func (d *Dispatcher) cancelQueued(ctx context.Context, id, reason string) error {
	_, err := commands.CancelJob(ctx, d.opts.Ledger, commands.Cancel{JobID: id, Reason: reason, Now: d.opts.Now()})
	if errors.Is(err, commands.ErrInvalidTransition) {
		return nil // it ended meanwhile
	}
	return err
}

// cancelCause is why a canceled run was canceled, as recorded: the cause
// its context was canceled with (RunJob's caller may give one, such as a
// timeout of its own), else a cancel request.
func cancelCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	return errCanceledByUser
}

// watchCancel cancels a job RunJob is running when a cancel request for it
// is appended (by job cancel, in another process), until ctx ends.
func (d *Dispatcher) watchCancel(ctx context.Context, id string, cancel context.CancelCauseFunc, done chan<- struct{}) {
	defer close(done)
	for {
		changed := d.opts.Ledger.Changed()
		evs, err := d.opts.Ledger.ReadStream(ctx, events.JobStream(id))
		if err == nil && len(evs) > 0 && evs[len(evs)-1].Type == events.JobCancelRequested {
			cancel(errCanceledByUser)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// busy reports whether every worker slot is taken.
func (d *Dispatcher) busy() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs >= d.max
}

// Running is how many jobs this dispatcher owns now (running, or recording
// their outcome).
func (d *Dispatcher) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.running)
}

func (d *Dispatcher) loop(ctx context.Context) {
	defer close(d.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		progressed := d.opts.Projector.Progressed()
		cancels := d.opts.Projector.SeenChanged(events.JobCancelRequested)
		next, err := d.fill(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Error("reading the queue failed; retrying in 1s", "err", err)
			next = d.opts.Now().Add(time.Second)
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(next.Sub(d.opts.Now()), time.Millisecond))
		}
		if d.busy() {
			// No slot to fill: of the projector's progress only a cancel
			// request matters (for a job we run); a freed slot, a due retry
			// or a worker finding nothing to hand its slot to wakes us.
			progressed = cancels
		}
		select {
		case <-ctx.Done():
			return
		case <-progressed:
		case <-d.freed:
		case <-timer.C:
		}
	}
}

// fill starts as many eligible jobs as there are free workers. It returns
// the earliest future retry time among queued jobs (zero if none).
func (d *Dispatcher) fill(ctx context.Context) (time.Time, error) {
	read, err := d.refresh(ctx)
	if err != nil {
		return time.Time{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.opts.Now()
	if now.Before(d.startPausedUntil) {
		return d.startPausedUntil, nil // the ledger refused a start: look again then
	}
	var next time.Time
	started := false
	skipped := false
	take := func(list []candidate) []candidate {
		kept := list[:0]
		for i, c := range list {
			if d.procs >= d.max && c.retryAt.IsZero() {
				// Every worker is busy and nothing further down waits for a
				// retry time: the rest stays as it is, unread.
				return append(kept, list[i:]...)
			}
			if d.ownedLocked(c) {
				// Ours, still finishing, or the projection has not caught up
				// with its end: skip it, but keep it, since a retry may make it
				// a candidate again without another read.
				kept = append(kept, c)
				continue
			}
			if c.retryAt.After(now) {
				if next.IsZero() || c.retryAt.Before(next) {
					next = c.retryAt
				}
				kept = append(kept, c)
				continue
			}
			if d.procs >= d.max || d.cappedLocked(c) {
				skipped = skipped || d.procs < d.max
				kept = append(kept, c) // smart dequeue: others may still run
				continue
			}
			d.launch(c)
			started = true
		}
		return kept
	}
	d.retries = take(d.retries)
	d.ready = take(d.ready)
	// Free workers, and eligible jobs may lie past the end of a truncated
	// cache: read again at the next wake-up.
	d.dry = d.procs < d.max && d.truncated && (skipped || !started)
	if d.dry && (!skipped || !read) {
		// The cache ran out, or it was read before the exit that freed this
		// worker: read on at once. The wake-up that brought us here may have
		// been the last one for a while (the exited job's outcome may already
		// be projected), and a fresh read may find a job past the cut.
		// After a fresh read that only found jobs held back by running ones,
		// wait: the exit of one of those wakes the loop or hands its slot on.
		d.wake()
	}
	return next, nil
}

// refresh re-reads the candidate cache when it may be stale, and acts on
// new cancel requests for jobs we run. It reports whether it read the cache.
func (d *Dispatcher) refresh(ctx context.Context) (read bool, err error) {
	d.mu.Lock()
	checkpoint := d.opts.Projector.Checkpoint()
	for id, seq := range d.settling {
		if seq <= checkpoint {
			delete(d.settling, id)
		}
	}
	var gen int64
	for _, t := range requeueEvents {
		gen += d.opts.Projector.Seen(t)
	}
	enqueued := d.opts.Projector.Seen(events.JobEnqueued)
	free := d.max - d.procs
	capped := d.cappedPlugins()
	// A truncated cache already holds the oldest jobs: new ones queue behind
	// them and matter only once it runs dry.
	newJobs := enqueued != d.cacheEnqueued && !d.truncated
	readCands := free > 0 && (gen != d.cacheGen || newJobs || d.dry || capped != d.cacheCapped)
	seen := d.opts.Projector.Seen(events.JobCancelRequested)
	checkCancels := len(d.running) > 0 && seen != d.cancelsSeen
	// Read past the jobs we own or are settling, plus room to skip capped plugins.
	limit := int64(free + len(d.running) + len(d.settling) + 256)
	d.mu.Unlock()
	if !readCands && !checkCancels {
		return false, nil
	}
	var ready, retries []candidate
	var cancels []string
	err = d.opts.Ledger.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		if readCands {
			err := queries.ListReadyJobs(conn, queries.ListReadyJobsParams{CappedPlugins: capped, MaxJobs: limit}, func(r queries.ListReadyJobsRow) error {
				ready = append(ready, candidate{id: r.ID, seq: r.Seq, plugin: r.Plugin, command: r.Command, dedupeKey: deref(r.DedupeKey)})
				return nil
			})
			if err != nil {
				return err
			}
			err = queries.ListWaitingRetries(conn, func(r queries.ListWaitingRetriesRow) error {
				at, err := time.Parse(time.RFC3339Nano, deref(r.NextRetryAt))
				if err != nil {
					return fmt.Errorf("job %s: next_retry_at: %w", r.ID, err)
				}
				retries = append(retries, candidate{id: r.ID, seq: r.Seq, plugin: r.Plugin, command: r.Command, dedupeKey: deref(r.DedupeKey), retryAt: at})
				return nil
			})
			if err != nil {
				return err
			}
		}
		if !checkCancels {
			return nil
		}
		return queries.ListCancelRequested(conn, func(id string) error {
			cancels = append(cancels, id)
			return nil
		})
	})
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if checkCancels {
		d.cancelsSeen = seen // only once read: a failed read is tried again
	}
	if readCands {
		d.ready, d.retries, d.cacheGen, d.cacheCapped, d.dry = ready, retries, gen, capped, false
		d.cacheEnqueued = enqueued
		d.truncated = int64(len(ready)) == limit
	}
	for _, id := range cancels {
		if r, ok := d.running[id]; ok {
			r.cancel(errCanceledByUser)
		}
	}
	return readCands, nil
}

// launch hands a job to a new worker. Called with d.mu held.
func (d *Dispatcher) launch(c candidate) {
	ctx, _ := d.claimLocked(c)
	go d.worker(ctx, c, nil)
}

// claimLocked takes a worker slot for c and returns the context its worker
// runs under, with the function that cancels it (also what a cancel request
// or Stop calls). Called with d.mu held.
func (d *Dispatcher) claimLocked(c candidate) (context.Context, context.CancelCauseFunc) {
	rctx, cancel := context.WithCancelCause(d.runCtx)
	d.running[c.id] = &run{candidate: c, active: true, cancel: cancel}
	d.procs++
	d.perPlug[c.plugin]++
	d.wg.Add(1)
	return rctx, cancel
}

// submitStart queues c's start (a relaxed, versioned append) and returns
// the function that waits for it. Like every append of a worker, it is not
// tied to the job's context: it must land even if the job is canceled.
func (d *Dispatcher) submitStart(c candidate) func() (commands.Started, error) {
	return commands.SubmitStart(context.Background(), d.opts.Ledger, commands.Start{
		JobID: c.id, Timeout: d.opts.Config.Timeout(c.plugin, c.command), PID: os.Getpid(), Now: d.opts.Now(),
	})
}

// capacity is a plugin's parallelism cap: config parallelism (0: only the
// worker pool limits it), and 1 when its manifest says it is not
// concurrency-safe.
func (d *Dispatcher) capacity(plugin string) int {
	capacity := d.opts.Config.Plugin(plugin).Parallelism
	if p, ok := d.opts.Plugins.Get(plugin); ok && !p.Manifest.ConcurrencySafe {
		capacity = 1
	}
	if capacity <= 0 {
		capacity = d.max
	}
	return capacity
}

// cappedPlugins is a JSON array of the plugins at their parallelism cap
// now, sorted, for the candidate query to leave out. Called with d.mu held.
func (d *Dispatcher) cappedPlugins() string {
	var names []string
	for name, n := range d.perPlug {
		// A cap as large as the pool never excludes anything the pool allows.
		if capacity := d.capacity(name); capacity < d.max && n >= capacity {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "[]"
	}
	slices.Sort(names)
	b, _ := json.Marshal(names)
	return string(b)
}

// ownedLocked reports whether c is a job this dispatcher runs, or one whose
// end the projection has not caught up with yet. Called with d.mu held.
func (d *Dispatcher) ownedLocked(c candidate) bool {
	_, mine := d.running[c.id]
	_, settling := d.settling[c.id]
	return mine || settling
}

// cappedLocked reports whether c may not start now even with a free slot:
// its plugin is at its parallelism cap, or a job with its dedupe key and
// target runs. Called with d.mu held.
func (d *Dispatcher) cappedLocked(c candidate) bool {
	return d.perPlug[c.plugin] >= d.capacity(c.plugin) || (c.dedupeKey != "" && d.sameKeyRunning(c))
}

func (d *Dispatcher) sameKeyRunning(c candidate) bool {
	for _, r := range d.running {
		if r.active && r.dedupeKey == c.dedupeKey && r.plugin == c.plugin && r.command == c.command {
			return true
		}
	}
	return false
}

// releaseLocked frees c's worker slot if it still holds one, and reports
// whether it did. Called with d.mu held.
func (d *Dispatcher) releaseLocked(c candidate) bool {
	r, ok := d.running[c.id]
	if !ok || !r.active {
		return false
	}
	r.active = false
	d.procs--
	d.perPlug[c.plugin]--
	return true
}

// handoff frees the slot of a job whose process has exited and, while the
// dispatch loop runs, gives it straight to the next eligible job in the
// candidate cache: it claims the slot for that job and submits its start,
// returning the job, its worker's context and the claim to launch its
// worker with (a nil claim: no handoff). Whatever the cache cannot settle,
// the loop does at its next wake-up, as after any exit.
func (d *Dispatcher) handoff(c candidate) (candidate, context.Context, func() (commands.Started, error)) {
	d.mu.Lock()
	d.releaseLocked(c)
	if d.loopCtx == nil || d.loopCtx.Err() != nil {
		d.mu.Unlock()
		return candidate{}, nil, nil
	}
	next, ok := d.pickLocked(d.opts.Now())
	if !ok {
		d.mu.Unlock()
		return candidate{}, nil, nil
	}
	ctx, _ := d.claimLocked(next)
	d.mu.Unlock()
	return next, ctx, d.submitStart(next)
}

// pickLocked takes the oldest job in the candidate cache that may start
// now out of the cache, by the rules fill applies. Called with d.mu held.
func (d *Dispatcher) pickLocked(now time.Time) (candidate, bool) {
	if d.procs >= d.max || now.Before(d.startPausedUntil) {
		return candidate{}, false
	}
	for _, list := range []*[]candidate{&d.retries, &d.ready} {
		for i, c := range *list {
			if d.ownedLocked(c) || c.retryAt.After(now) || d.cappedLocked(c) {
				continue
			}
			*list = slices.Delete(*list, i, i+1)
			return c, true
		}
	}
	return candidate{}, false
}

// finish forgets a job once its outcome is recorded; settleSeq is the seq of
// that record (0 if nothing was appended), which the projector must reach
// before the job can be considered again. ended says the job is terminal
// (succeeded, dead or canceled).
func (d *Dispatcher) finish(c candidate, settleSeq int64, ended bool) {
	d.mu.Lock()
	freed := d.releaseLocked(c) // still held if it never got a process
	delete(d.running, c.id)
	if settleSeq > 0 {
		d.settling[c.id] = settleSeq
	}
	d.mu.Unlock()
	// A slot freed here, or a job that may now be a candidate again (a
	// retry: the loop looks, and arms its timer for the retry time), wakes
	// the loop. An ended job whose process exited changes nothing the loop
	// would act on: its slot, its plugin's cap and its dedupe key were
	// released then (handed over, or the loop woken).
	if freed || !ended {
		d.wake()
	}
	d.wg.Done()
}

func (d *Dispatcher) wake() {
	select {
	case d.freed <- struct{}{}:
	default:
	}
}

// worker runs one job for the dispatch loop. A start the ledger refused
// for now pauses every start (startRefused); the loop reads the queue again
// once the pause is over, so the job is not forgotten.
func (d *Dispatcher) worker(ctx context.Context, c candidate, claim func() (commands.Started, error)) {
	_ = d.work(ctx, c, claim)
}

// startRefused pauses starting jobs after a start the ledger refused for
// now (startErr): for MinStartPause, or twice the last pause (at most
// MaxStartPause) if this refusal came after that pause was over. A
// refusal during a pause (another worker's start, submitted before it)
// only counts. The failure is logged once per run and window.
func (d *Dispatcher) startRefused(startErr error) {
	d.startsRefused.Add(1)
	d.mu.Lock()
	now := d.opts.Now()
	if !now.Before(d.startPausedUntil) {
		d.startPause = min(max(2*d.startPause, MinStartPause), MaxStartPause)
		d.startPausedUntil = now.Add(d.startPause)
	}
	d.startPaused.Store(true)
	d.cacheGen = -1 // the job is still queued: read the queue again after the pause
	pause := d.startPause
	line := d.startFailures.failed(now)
	d.mu.Unlock()
	if line != "" {
		d.log.Warn(line, "err", startErr, "pause", pause.String())
	}
}

// startRecorded ends a pause of starts, if there is one: the ledger
// records starts again.
func (d *Dispatcher) startRecorded() {
	if !d.startPaused.Load() {
		return
	}
	d.mu.Lock()
	d.startPause, d.startPausedUntil = 0, time.Time{}
	d.startPaused.Store(false)
	line, refused := d.startFailures.ended(d.opts.Now())
	d.mu.Unlock()
	if line != "" {
		d.log.Warn(line)
	}
	if refused > 0 {
		d.log.Info("job starts are recorded again", "refused_starts", refused)
	}
}

// startPauseLeft is how long the current pause of starts has to run.
func (d *Dispatcher) startPauseLeft() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(d.startPausedUntil.Sub(d.opts.Now()), 0)
}

// StartsRefused is how many job starts the ledger has refused for now
// (busy, disk full…) since the dispatcher was created.
func (d *Dispatcher) StartsRefused() int64 { return d.startsRefused.Load() }

// refusedForNow reports whether a start failed for a reason that may pass
// (the ledger busy, full…), not because the job moved on.
func refusedForNow(startErr error) bool {
	return startErr != nil && !errors.Is(startErr, commands.ErrInvalidTransition) && !errors.Is(startErr, commands.ErrNotDue)
}

// work runs one job: start, run the plugin, complete. claim, if not nil,
// waits for the job's start, already submitted (by the worker that handed
// its slot over); otherwise work submits it. It returns the start's error if
// the job was not started, nil if it was.
func (d *Dispatcher) work(ctx context.Context, c candidate, claim func() (commands.Started, error)) error {
	var settle int64
	ended := false
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("worker panicked", "job_id", c.id, "plugin", c.plugin, "panic", fmt.Sprint(p))
		}
		d.finish(c, settle, ended)
	}()
	log := d.log.With("job_id", c.id, "plugin", c.plugin, "command", c.command)

	// The start is submitted first (unless the worker that handed its slot
	// over did), so it is recorded while the process starts; the process
	// gets its request, with the state read in the start's transaction,
	// only once it is.
	if claim == nil {
		claim = d.submitStart(c)
	}
	var st commands.Started
	var startErr error
	started := false
	start := func() error {
		st, startErr = claim()
		started = startErr == nil
		return startErr
	}
	timeout := d.opts.Config.Timeout(c.plugin, c.command)
	var res pluginhost.Result
	p, cfgJSON, problem := d.runnable(c)
	if problem == "" {
		res = pluginhost.RunPrepared(ctx, p, c.command, func() (pluginhost.Request, error) {
			if err := start(); err != nil {
				return pluginhost.Request{}, err
			}
			return pluginhost.Request{
				Protocol: pluginhost.ProtocolVersion, JobID: st.JobID, Command: st.Command,
				Config: cfgJSON, State: st.State, Context: json.RawMessage("{}"), Event: st.Event,
				DeadlineAt: d.opts.Now().Add(timeout),
			}, nil
		}, pluginhost.RunOptions{Timeout: timeout, Grace: d.opts.Grace, OnStderr: func(lines pluginhost.StderrLines) {
			// A plugin may write before its start is recorded (it runs from
			// the spawn on): its lines wait for the start's answer (claim
			// may be waited for again), which comes, since a spawned
			// plugin's request is always prepared.
			if st, err := claim(); err == nil {
				d.recordStderr(st.Job, lines)
			}
		}})
	}
	if !started && startErr == nil {
		// No process got a request: the plugin cannot run here (problem),
		// or its process could not be spawned (a missing interpreter, no
		// more processes…; res says so). The attempt is recorded all the
		// same, started and failed, so it is retried like any other.
		start()
	}
	if !started {
		if refusedForNow(startErr) {
			d.startRefused(startErr)
		} else {
			log.Debug("job not started", "err", startErr) // canceled, or started elsewhere
		}
		return startErr
	}
	d.startRecorded()
	outcome := commands.Outcome{Kind: events.OutcomeError, Error: problem}
	if problem == "" {
		outcome = d.outcome(ctx, res, log)
	}
	job := st.Job
	complete := commands.Complete{JobID: job.JobID, Attempt: job.Attempt, Outcome: outcome, Now: d.opts.Now()}
	if outcome.Kind == events.OutcomeOK {
		d.addRoutingAndFacts(&complete, job, res, log)
		complete.Prepare() // the children's JSON work, before the next start is queued
	}
	// The slot is free: hand it to the next job, whose start is queued right
	// before this outcome, so that one transaction usually holds both.
	next, nextCtx, nextClaim := d.handoff(c)
	recorded := commands.SubmitComplete(context.Background(), d.opts.Ledger, complete)
	if nextClaim != nil {
		go d.worker(nextCtx, next, nextClaim)
	} else {
		d.wake() // the loop fills the slot, or finds nothing to do
	}
	cres, ok := d.complete(complete, recorded, log)
	if !ok {
		return nil
	}
	settle = cres.Seqs[len(cres.Seqs)-1]
	ended = cres.Status.Terminal()
	d.logOutcome(log, job, outcome, cres, complete.Children)
	return nil
}

// recordStderr submits lines the plugin of a running job wrote to stderr
// (job.stderr_written) without waiting for them: they are queued before the
// job's outcome, whatever becomes of them, and a refusal (the job has moved
// on) loses nothing the outcome does not carry.
func (d *Dispatcher) recordStderr(job *commands.Job, sl pluginhost.StderrLines) {
	lines := make([]events.StderrLine, len(sl.Lines))
	for i, l := range sl.Lines {
		lines[i] = events.StderrLine{At: commands.Time(l.At), Text: l.Text}
	}
	commands.SubmitStderr(context.Background(), d.opts.Ledger, commands.RecordStderr{
		JobID: job.JobID, Attempt: job.Attempt, Line: sl.First + 1, Lines: lines, Truncated: sl.Truncated,
	})
}

// complete waits for an attempt's outcome, submitted as first, and submits
// it again with backoff if the ledger could not take it for now (busy,
// full…): the outcome must not be lost. An outcome the ledger refuses for
// what it holds is replaced once by the attempt failed without the
// plugin's output (Complete.Refused), which ends the job. A transition
// error means an earlier try did land (or the job moved on).
func (d *Dispatcher) complete(cmd commands.Complete, first func() (commands.CompleteResult, error), log *slog.Logger) (commands.CompleteResult, bool) {
	backoff := 100 * time.Millisecond
	for {
		res, err := first()
		first = func() (commands.CompleteResult, error) {
			return commands.CompleteJob(context.Background(), d.opts.Ledger, cmd)
		}
		switch {
		case err == nil:
			return res, true
		case errors.Is(err, commands.ErrInvalidTransition):
			log.Warn("the job's outcome was not recorded: the job has moved on", "err", err)
			return res, false
		case errors.Is(err, ledger.ErrClosed):
			log.Error("the job's outcome was not recorded: the ledger is closed; recovery will run it again", "err", err)
			return res, false
		case commands.ContentRefused(err) && cmd.Outcome.Kind != events.OutcomeRefused:
			log.Error("the ledger refused the job's outcome; recording the attempt as failed without the plugin's output", "err", err)
			cmd = cmd.Refused(err)
			continue
		}
		log.Error("recording the job's outcome failed; will try again", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-d.runCtx.Done():
			t.Stop()
			log.Error("gave up recording the job's outcome at shutdown; recovery will run it again")
			return res, false
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// runnable finds the job's plugin and its config, or says why it cannot run.
func (d *Dispatcher) runnable(c candidate) (*pluginhost.Plugin, json.RawMessage, string) {
	p, ok := d.opts.Plugins.Get(c.plugin)
	if !ok {
		return nil, nil, fmt.Sprintf("plugin %q is not installed or failed to load (see: ductile plugin list)", c.plugin)
	}
	if !d.opts.Config.Plugin(c.plugin).Enabled {
		return nil, nil, fmt.Sprintf("plugin %q is disabled in the config (plugins.%s.enabled: false)", c.plugin, c.plugin)
	}
	if _, ok := p.Command(c.command); !ok {
		return nil, nil, fmt.Sprintf("plugin %q has no command %q", c.plugin, c.command)
	}
	cfgJSON, err := d.pluginConfig(c.plugin)
	if err != nil {
		return nil, nil, "encode plugin config: " + err.Error()
	}
	return p, cfgJSON, ""
}

// pluginConfig is a plugin's config as JSON, encoded once: the config does
// not change while the dispatcher runs.
func (d *Dispatcher) pluginConfig(plugin string) (json.RawMessage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.configs[plugin]; ok {
		return b, nil
	}
	b, err := json.Marshal(d.opts.Config.Plugin(plugin).Config)
	if err == nil {
		d.configs[plugin] = b
	}
	return b, err
}

// outcome turns a plugin run into the Outcome to record, and logs what the
// plugin wrote to stderr and its logs.
func (d *Dispatcher) outcome(ctx context.Context, res pluginhost.Result, log *slog.Logger) commands.Outcome {
	out := commands.Outcome{
		Kind: res.Kind, Retryable: res.Retryable, Error: res.Err, ExitCode: res.ExitCode,
		Duration: res.Duration, Stderr: string(res.Stderr), StderrTruncated: res.StderrTruncated,
	}
	if res.Response != nil {
		// ParseResponse accepted exactly this (one JSON object, trimmed).
		out.Response = json.RawMessage(bytes.TrimSpace(res.Stdout))
		out.StateUpdates = res.Response.StateUpdates
	} else if len(res.Stdout) > 0 {
		out.Stdout = string(res.Stdout)
	}
	if res.Kind == events.OutcomeCanceled {
		if errors.Is(context.Cause(ctx), errShutdown) {
			out.Kind, out.Retryable, out.Error = events.OutcomeInterrupted, true, errShutdown.Error()
		} else {
			out.Kind, out.Error = events.OutcomeCanceled, cancelCause(ctx).Error()
		}
	}
	if len(res.Stderr) > 0 {
		log.Warn("plugin wrote to stderr", "stderr", tail(string(res.Stderr), 2048), "truncated", res.StderrTruncated)
	}
	if res.Response != nil {
		for _, l := range res.Response.Logs {
			log.Log(ctx, pluginLevel(l.Level), l.Message, "source", "plugin")
		}
	}
	return out
}

func (d *Dispatcher) addRoutingAndFacts(complete *commands.Complete, job *commands.Job, res pluginhost.Result, log *slog.Logger) {
	if p, ok := d.opts.Plugins.Get(job.Plugin); ok {
		for _, fo := range p.Manifest.FactOutputsFor(job.Command) {
			if fo.From == "" || fo.From == "state_updates" {
				complete.Facts = append(complete.Facts, commands.FactRule{FactType: fo.FactType, View: string(fo.CompatibilityView)})
			}
		}
	}
	if res.Response == nil || len(res.Response.Events) == 0 {
		return
	}
	evs := make([]router.Event, len(res.Response.Events))
	for i, e := range res.Response.Events {
		evs[i] = router.Event{Type: e.Type, Payload: e.Payload, DedupeKey: e.DedupeKey}
	}
	children, unrouted, err := router.Route(d.opts.Config.Routes, job.Plugin, job.DedupeKey, evs, d.opts.Now())
	if err != nil {
		log.Error("routing failed", "err", err)
		return
	}
	if len(unrouted) > 0 {
		log.Debug("events without a route", "event_types", unrouted)
	}
	for _, ch := range children {
		enq := JobFor(d.opts.Config, ch.Plugin, ch.Command, commands.ByRoute)
		enq.Payload, enq.Event, enq.DedupeKey, enq.SourceEventID, enq.Causation = ch.Payload, ch.Envelope, ch.DedupeKey, ch.EventID, ch.EventID
		complete.Children = append(complete.Children, enq)
	}
}

func (d *Dispatcher) logOutcome(log *slog.Logger, job *commands.Job, out commands.Outcome, res commands.CompleteResult, children []commands.Enqueue) {
	attrs := []any{"attempt", job.Attempt, "duration_ms", out.Duration.Milliseconds(), "status", res.Status}
	switch res.Status {
	case events.StatusSucceeded:
		routed := 0
		for i, c := range res.Children {
			if !c.Deduped {
				routed++
				continue
			}
			log.Info("routed job dropped as a duplicate", "to", children[i].Plugin, "dedupe_key", children[i].DedupeKey, "existing_job_id", c.ExistingJobID)
		}
		log.Info("job succeeded", append(attrs, "children", routed)...)
	case events.StatusQueued:
		log.Warn("job failed; will retry", append(attrs, "kind", res.Kind, "error", res.Error, "next_retry_at", commands.Time(res.NextRetryAt))...)
	case events.StatusCanceled:
		log.Info("job canceled", attrs...)
	default:
		log.Error("job is dead", append(attrs, "kind", res.Kind, "error", res.Error)...)
	}
}

// JobFor is an Enqueue for plugin and command with the config's retry and
// dedupe defaults. Every producer builds its jobs with it.
func JobFor(cfg *config.Config, plugin, command, by string) commands.Enqueue {
	pc := cfg.Plugin(plugin)
	return commands.Enqueue{
		Plugin: plugin, Command: command, SubmittedBy: by,
		MaxAttempts: pc.Retry.MaxAttempts, BackoffBase: pc.Retry.BackoffBase,
		DefaultDedupeTTL: cfg.Service.DedupeTTL, Now: time.Now(),
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func pluginLevel(l string) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
