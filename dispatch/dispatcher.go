package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/projections"
)

// Options configure a Dispatcher, and RunJob.
type Options struct {
	// Engine is what jobs run with until Apply brings another, and the
	// ledger they are recorded in.
	Engine    *engine.Engine
	Projector *projections.Projector // the dispatch loop's wake-ups; RunJob needs none
	// Worker is who runs the attempts, as recorded (default:
	// engine.LocalWorker()).
	Worker events.Worker
	Logger *slog.Logger
	// MaxWorkers overrides config service.max_workers.
	MaxWorkers int
	// Grace between SIGTERM and SIGKILL of a plugin (default 5s).
	Grace time.Duration
	// DrainTimeout is how long Stop lets running jobs finish before
	// interrupting them (default 10s).
	DrainTimeout time.Duration
	Now          func() time.Time
	// Observer, if set, is told how each attempt ends (metrics).
	Observer Observer
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Worker.Name == "" {
		o.Worker = engine.LocalWorker()
	}
	if o.Grace <= 0 {
		o.Grace = pluginhost.DefaultGrace
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	return o
}

// workers is the size of the worker pool with cfg: MaxWorkers if set,
// else cfg's service.max_workers, at least 1.
func (o Options) workers(cfg *config.Config) int {
	if o.MaxWorkers > 0 {
		return o.MaxWorkers
	}
	return max(cfg.Service.MaxWorkers, 1)
}

// Apply makes e what jobs started from now on run with (a config reload):
// plugin settings, parallelism caps and the worker pool's size change at
// once, routes, breakers and pipelines too (a pipeline run already going
// finishes on the version it recorded: commands.Pipelines); a job already
// claimed runs to its outcome with the plugins it started with. Shrinking
// the pool stops no running job: the slots free as they finish.
func (d *Dispatcher) Apply(e *engine.Engine) {
	d.runner.current.Store(e)
	d.mu.Lock()
	d.slots.max = d.opts.workers(e.Config())
	d.queue.forceRead()
	d.mu.Unlock()
	d.wake()
}

// Dispatcher runs queued jobs: one loop reads the queue (queue.go) and
// hands each eligible job to a worker slot (slots.go), and each worker runs
// its job (runner.go). Start runs it; Stop drains it.
type Dispatcher struct {
	opts   Options
	log    *slog.Logger
	runner *runner

	mu    sync.Mutex
	slots slots // guarded by mu
	queue queue // guarded by mu

	woken   chan struct{}   // a slot was freed, or the queue must be read again
	loopCtx context.Context // the dispatch loop's (guarded by mu); nil before Start
	cancel  context.CancelFunc
	done    chan struct{}
	workers sync.WaitGroup
	// runCtx is the parent of every worker's context; it outlives Stop's
	// drain, and ends only when Stop gives up on interrupted workers.
	runCtx  context.Context
	stopRun context.CancelFunc
}

var (
	errCanceledByUser = errors.New("canceled by request")
	errShutdown       = errors.New("the daemon is shutting down")
)

// New returns a dispatcher.
func New(opts Options) *Dispatcher {
	opts = opts.withDefaults()
	workers := opts.workers(opts.Engine.Config())
	runCtx, stopRun := context.WithCancel(context.Background())
	d := &Dispatcher{
		opts:    opts,
		log:     opts.Logger.With("component", "dispatcher"),
		runner:  newRunner(opts, runCtx),
		woken:   make(chan struct{}, 1),
		runCtx:  runCtx,
		stopRun: stopRun,
	}
	d.slots = newSlots(workers, d.capacity)
	d.queue.forceRead()
	return d
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
	defer d.stopRun()
	if d.cancel == nil {
		return
	}
	d.cancel()
	<-d.done
	finished := make(chan struct{})
	go func() { d.workers.Wait(); close(finished) }()
	t := time.NewTimer(d.opts.DrainTimeout)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		d.log.Warn("interrupting jobs still running at shutdown", "jobs", d.Running())
		d.mu.Lock()
		d.slots.cancelAll(errShutdown)
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
			d.stopRun()
			<-finished
		}
	}
}

// Running is how many jobs this dispatcher owns now (running, or recording
// their outcome).
func (d *Dispatcher) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.slots.running)
}

// StartsRefused is how many job starts the ledger has refused for now
// (busy, disk full…) since the dispatcher was created.
func (d *Dispatcher) StartsRefused() int64 { return d.runner.pause.refusals() }

// loop sleeps until something can change what the dispatcher may start —
// the projector moved, a slot was freed, the earliest retry came due — and
// then fills the free slots.
func (d *Dispatcher) loop(ctx context.Context) {
	defer close(d.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		progressed := d.opts.Projector.Progressed()
		cancels := d.opts.Projector.SeenChanged(cancelRequested)
		next, err := d.fill(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Error("reading the queue failed; retrying in 1s", "err", err)
			next = d.opts.Now().Add(time.Second)
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(next.Sub(d.opts.Now()), time.Millisecond))
		}
		if d.full() {
			// No slot to fill: of the projector's progress only a cancel
			// request matters (for a job we run); a freed slot, a due retry
			// or a worker finding nothing to hand its slot to wakes us.
			progressed = cancels
		}
		select {
		case <-ctx.Done():
			return
		case <-progressed:
		case <-d.woken:
		case <-timer.C:
		}
	}
}

// wake makes the loop look again at its next turn.
func (d *Dispatcher) wake() {
	select {
	case d.woken <- struct{}{}:
	default:
	}
}

// launch claims a slot for c, queues its start and hands it to a new
// worker. Called with d.mu held.
func (d *Dispatcher) launch(c candidate) {
	ctx := d.claimLocked(c)
	go d.work(ctx, c, d.runner.newClaim(c, false))
}

// claimLocked takes a worker slot for c and returns the context its worker
// runs under. Called with d.mu held.
func (d *Dispatcher) claimLocked(c candidate) context.Context {
	ctx, cancel := context.WithCancelCause(d.runCtx)
	d.slots.claim(c, cancel)
	d.workers.Add(1)
	return ctx
}

// work is one worker: it runs one job, handing its slot on as soon as the
// plugin's process has exited, then forgets the job.
func (d *Dispatcher) work(ctx context.Context, c candidate, start *startClaim) {
	var a attempt
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("worker panicked", "job_id", c.id, "plugin", c.plugin, "panic", fmt.Sprint(p))
		}
		start.spawned(d.runner.ledger, nil) // a start handed to another worker must not hold it waiting
		d.finish(c, a)
	}()
	a = d.runner.run(ctx, c, start, func() *startClaim { return d.handoff(c) })
}

// handoff frees the slot of a job whose process has exited and, while the
// dispatch loop runs, gives it straight to the next eligible job in the
// queue's cache: it launches that job's worker, which spawns its plugin at
// once, and returns its start for the exited job's worker to record with
// its outcome, in one commit. Whatever the cache cannot settle, the loop
// does at its next wake-up, as after any exit. The exited job keeps its
// place in its plugin's cap until its outcome is recorded (finish), unless
// the next job is of the same plugin and takes it.
func (d *Dispatcher) handoff(c candidate) *startClaim {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slots.release(c)
	if d.loopCtx == nil || d.loopCtx.Err() != nil {
		return nil
	}
	d.slots.handOver(c, false)
	next, ok := d.pickLocked(d.opts.Now())
	d.slots.handOver(c, !ok || next.plugin != c.plugin) // kept unless a job of its plugin takes it
	if !ok {
		d.wake() // the loop fills the slot, or finds nothing to do
		return nil
	}
	ctx := d.claimLocked(next)
	start := d.runner.newClaim(next, true)
	go d.work(ctx, next, start)
	return start
}

// finish forgets a job once its outcome is recorded (or its start was
// refused), remembering it as settling until the projector has passed that
// record.
func (d *Dispatcher) finish(c candidate, a attempt) {
	d.mu.Lock()
	d.slots.finish(c, a.settle)
	if refusedForNow(a.startErr) {
		d.queue.forceRead() // the job is still queued: read the queue again after the pause
	}
	d.mu.Unlock()
	// A slot freed here, a place in a plugin's cap given back, or a job
	// that may now be a candidate again (a retry: the loop looks, and arms
	// its timer for the retry time) wakes the loop.
	d.wake()
	d.workers.Done()
}

// capacity is a plugin's parallelism cap: config parallelism (0: only the
// worker pool limits it), and 1 when its manifest says it is not
// concurrency-safe; 0 when its jobs run on remote workers only (runs_on:
// remote), so the dispatcher never starts them; less the jobs remote
// workers hold when they run on both (runs_on: any).
func (d *Dispatcher) capacity(plugin string) int {
	e := d.runner.current.Load()
	if !e.Config().Plugin(plugin).RunsOn.Local() {
		return 0
	}
	capacity := e.Config().Plugin(plugin).Parallelism
	if p, ok := e.Plugins().Get(plugin); ok && !p.Manifest.ConcurrencySafe {
		capacity = 1
	}
	if capacity <= 0 {
		return d.slots.max
	}
	if e.Config().Plugin(plugin).RunsOn.Remote() {
		// runs_on: any: the jobs remote workers hold count toward the cap.
		capacity = max(0, capacity-e.Fleet().ActiveRemote(plugin))
	}
	return capacity
}

// remoteOnly are the plugins whose jobs only remote workers run (runs_on:
// remote): the queue's read leaves them out.
func (d *Dispatcher) remoteOnly() []string {
	var names []string
	for name, p := range d.runner.current.Load().Config().Plugins {
		if !p.RunsOn.Local() {
			names = append(names, name)
		}
	}
	return names
}

// full reports whether every worker slot is taken.
func (d *Dispatcher) full() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.slots.free() == 0
}
