package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
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
	running  map[string]*run // by job id
	settling map[string]int64
	perPlug  map[string]int

	freed  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup
	runCtx context.Context // parent of worker contexts, canceled when draining ends
	stopRn context.CancelFunc
}

type run struct {
	candidate
	cancel context.CancelCauseFunc
}

type candidate struct {
	id, plugin, command, dedupeKey string
	seq                            int64
	retryAt                        time.Time
}

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
	return &Dispatcher{
		opts:     opts,
		log:      opts.Logger.With("component", "dispatcher"),
		max:      max,
		running:  map[string]*run{},
		settling: map[string]int64{},
		perPlug:  map[string]int{},
		freed:    make(chan struct{}, 1),
	}
}

// Start runs the dispatch loop in the background and returns at once.
func (d *Dispatcher) Start(ctx context.Context) {
	d.runCtx, d.stopRn = context.WithCancel(context.WithoutCancel(ctx))
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go d.loop(ctx)
}

// Stop stops starting jobs, gives running ones DrainTimeout to finish, then
// interrupts the rest (their attempt is recorded as interrupted and retried
// later), and waits for every worker to record its outcome.
func (d *Dispatcher) Stop() {
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
		<-finished
	}
	d.stopRn()
}

// Running is how many jobs are running now.
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
		next, err := d.fill(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Error("reading the queue failed; retrying in 1s", "err", err)
			next = d.opts.Now().Add(time.Second)
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(next.Sub(d.opts.Now()), time.Millisecond))
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
	d.mu.Lock()
	free := d.max - len(d.running)
	checkpoint := d.opts.Projector.Checkpoint()
	for id, seq := range d.settling {
		if seq <= checkpoint {
			delete(d.settling, id)
		}
	}
	d.mu.Unlock()

	cands, cancels, err := d.readQueue(ctx, free)
	if err != nil {
		return time.Time{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range cancels {
		if r, ok := d.running[id]; ok {
			r.cancel(errCanceledByUser)
		}
	}
	now := d.opts.Now()
	var next time.Time
	for _, c := range cands {
		if _, busy := d.running[c.id]; busy {
			continue
		}
		if _, done := d.settling[c.id]; done {
			continue
		}
		if c.retryAt.After(now) {
			if next.IsZero() || c.retryAt.Before(next) {
				next = c.retryAt
			}
			continue
		}
		if len(d.running) >= d.max {
			continue // keep scanning: a retry timer may still be needed
		}
		if d.perPlug[c.plugin] >= d.capacity(c.plugin) {
			continue // smart dequeue: this plugin is at its cap, others may run
		}
		if c.dedupeKey != "" && d.sameKeyRunning(c) {
			continue
		}
		rctx, cancel := context.WithCancelCause(d.runCtx)
		d.running[c.id] = &run{candidate: c, cancel: cancel}
		d.perPlug[c.plugin]++
		d.wg.Add(1)
		go d.work(rctx, c)
	}
	return next, nil
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

func (d *Dispatcher) sameKeyRunning(c candidate) bool {
	for _, r := range d.running {
		if r.dedupeKey == c.dedupeKey && r.plugin == c.plugin && r.command == c.command {
			return true
		}
	}
	return false
}

// readQueue reads dispatch candidates (ready jobs, oldest first, and jobs
// waiting for a retry) and running jobs with a cancel request, in one
// snapshot.
func (d *Dispatcher) readQueue(ctx context.Context, free int) (cands []candidate, cancels []string, err error) {
	d.mu.Lock()
	// Read past the jobs we already run or are settling, plus room to skip
	// capped plugins.
	limit := int64(free + len(d.running) + len(d.settling) + 64)
	hasRunning := len(d.running) > 0
	d.mu.Unlock()
	err = d.opts.Ledger.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		if free > 0 {
			err := queries.ListReadyJobs(conn, limit, func(r queries.ListReadyJobsRow) error {
				cands = append(cands, candidate{id: r.ID, seq: r.Seq, plugin: r.Plugin, command: r.Command, dedupeKey: deref(r.DedupeKey)})
				return nil
			})
			if err != nil {
				return err
			}
		}
		err := queries.ListWaitingRetries(conn, func(r queries.ListWaitingRetriesRow) error {
			at, err := time.Parse(time.RFC3339Nano, deref(r.NextRetryAt))
			if err != nil {
				return fmt.Errorf("job %s: next_retry_at: %w", r.ID, err)
			}
			cands = append(cands, candidate{id: r.ID, seq: r.Seq, plugin: r.Plugin, command: r.Command, dedupeKey: deref(r.DedupeKey), retryAt: at})
			return nil
		})
		if err != nil || !hasRunning {
			return err
		}
		return queries.ListCancelRequested(conn, func(id string) error {
			cancels = append(cancels, id)
			return nil
		})
	})
	sort.Slice(cands, func(i, j int) bool { return cands[i].seq < cands[j].seq })
	return cands, cancels, err
}

// finish forgets a job once its worker is done; settleSeq is the seq of its
// completion (0 if nothing was appended), which the projector must reach
// before the job can be considered again.
func (d *Dispatcher) finish(c candidate, settleSeq int64) {
	d.mu.Lock()
	delete(d.running, c.id)
	d.perPlug[c.plugin]--
	if settleSeq > 0 {
		d.settling[c.id] = settleSeq
	}
	d.mu.Unlock()
	select {
	case d.freed <- struct{}{}:
	default:
	}
	d.wg.Done()
}

// work runs one job: start, run the plugin, complete.
func (d *Dispatcher) work(ctx context.Context, c candidate) {
	var settle int64
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("worker panicked", "job_id", c.id, "plugin", c.plugin, "panic", fmt.Sprint(p))
		}
		d.finish(c, settle)
	}()
	log := d.log.With("job_id", c.id, "plugin", c.plugin, "command", c.command)
	// Appends must land even when the job's context is canceled.
	wctx := context.WithoutCancel(ctx)

	timeout := d.opts.Config.Timeout(c.plugin, c.command)
	job, err := commands.StartJob(wctx, d.opts.Ledger, commands.Start{JobID: c.id, Timeout: timeout, PID: os.Getpid(), Now: d.opts.Now()})
	if err != nil {
		// Not startable any more (canceled, or started elsewhere): nothing to do.
		log.Debug("job not started", "err", err)
		return
	}
	res, outcome := d.runPlugin(ctx, job, timeout, log)
	complete := commands.Complete{JobID: job.JobID, Attempt: job.Attempt, Outcome: outcome, Now: d.opts.Now()}
	if outcome.Kind == commands.OutcomeOK {
		d.addRoutingAndFacts(&complete, job, res, log)
	}
	cres, err := commands.CompleteJob(wctx, d.opts.Ledger, complete)
	if err != nil {
		log.Error("recording the job's outcome failed", "err", err)
		return
	}
	settle = cres.Seqs[len(cres.Seqs)-1]
	d.logOutcome(log, job, outcome, cres)
}

// runPlugin runs the job's plugin and turns the result into an Outcome.
func (d *Dispatcher) runPlugin(ctx context.Context, job *commands.Job, timeout time.Duration, log *slog.Logger) (pluginhost.Result, commands.Outcome) {
	p, ok := d.opts.Plugins.Get(job.Plugin)
	if !ok {
		msg := fmt.Sprintf("plugin %q is not installed or failed to load (see: ductile plugin list)", job.Plugin)
		return pluginhost.Result{}, commands.Outcome{Kind: commands.OutcomeError, Error: msg}
	}
	if _, ok := p.Command(job.Command); !ok {
		msg := fmt.Sprintf("plugin %q has no command %q", job.Plugin, job.Command)
		return pluginhost.Result{}, commands.Outcome{Kind: commands.OutcomeError, Error: msg}
	}
	cfgJSON, err := json.Marshal(d.opts.Config.Plugin(job.Plugin).Config)
	if err != nil {
		return pluginhost.Result{}, commands.Outcome{Kind: commands.OutcomeError, Error: "encode plugin config: " + err.Error()}
	}
	state, err := d.pluginState(ctx, job.Plugin)
	if err != nil {
		return pluginhost.Result{}, commands.Outcome{Kind: commands.OutcomeError, Retryable: true, Error: "read plugin state: " + err.Error()}
	}
	req := pluginhost.Request{
		Protocol: pluginhost.ProtocolVersion, JobID: job.JobID, Command: job.Command,
		Config: cfgJSON, State: state, Context: json.RawMessage("{}"), Event: job.Event,
		DeadlineAt: d.opts.Now().Add(timeout),
	}
	res := pluginhost.Run(ctx, p, req, pluginhost.RunOptions{Timeout: timeout, Grace: d.opts.Grace})
	out := commands.Outcome{
		Kind: string(res.Kind), Retryable: res.Retryable, Error: res.Err, ExitCode: res.ExitCode,
		Duration: res.Duration, Stderr: string(res.Stderr), StderrTruncated: res.StderrTruncated,
	}
	if res.Response != nil {
		out.Response = trimmedJSON(res.Stdout)
		out.StateUpdates = res.Response.StateUpdates
	} else if len(res.Stdout) > 0 {
		out.Stdout = string(res.Stdout)
	}
	if res.Kind == pluginhost.KindCanceled {
		if errors.Is(context.Cause(ctx), errShutdown) {
			out.Kind, out.Retryable, out.Error = "interrupted", true, errShutdown.Error()
		} else {
			out.Kind, out.Error = commands.OutcomeCanceled, errCanceledByUser.Error()
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
	return res, out
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

func (d *Dispatcher) logOutcome(log *slog.Logger, job *commands.Job, out commands.Outcome, res commands.CompleteResult) {
	attrs := []any{"attempt", job.Attempt, "duration_ms", out.Duration.Milliseconds(), "status", res.Status}
	switch res.Status {
	case "succeeded":
		routed := 0
		for _, c := range res.Children {
			if !c.Deduped {
				routed++
			}
		}
		log.Info("job succeeded", append(attrs, "children", routed)...)
	case "queued":
		log.Warn("job failed; will retry", append(attrs, "kind", res.Kind, "error", out.Error, "next_retry_at", commands.Time(res.NextRetryAt))...)
	case "canceled":
		log.Info("job canceled", attrs...)
	default:
		log.Error("job is dead", append(attrs, "kind", res.Kind, "error", out.Error)...)
	}
}

func (d *Dispatcher) pluginState(ctx context.Context, plugin string) (json.RawMessage, error) {
	state := json.RawMessage("{}")
	err := d.opts.Ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.GetPluginState(conn, plugin, func(s string) error {
			state = json.RawMessage(s)
			return nil
		})
	})
	return state, err
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

func trimmedJSON(b []byte) json.RawMessage {
	var v json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return nil
	}
	return v
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
