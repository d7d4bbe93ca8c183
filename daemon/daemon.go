package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/metrics"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/schedule"
	"github.com/ductile/ductile/scheduler"
	"github.com/ductile/ductile/views"
	"github.com/ductile/ductile/webhooks"
)

// DBPath is the ledger file inside a state directory.
func DBPath(stateDir string) string { return filepath.Join(stateDir, "ductile.db") }

// BundledPluginsDir is where the plugins embedded in the binary are unpacked.
func BundledPluginsDir(stateDir string) string { return filepath.Join(stateDir, "plugins") }

// Options configure a daemon.
type Options struct {
	StateDir string
	Config   *config.Config // nil: config.Default()
	Logger   *slog.Logger
	// Ledger options (tests and benchmarks may relax durability).
	Ledger ledger.Options
	// MaxWorkers overrides the config's service.max_workers.
	MaxWorkers int
	// Grace between SIGTERM and SIGKILL of a plugin (default 5s).
	Grace time.Duration
	// DrainTimeout is how long Close lets running jobs finish before
	// interrupting them (default 10s).
	DrainTimeout time.Duration
	// NoDispatch opens everything but the dispatch loop: the caller runs
	// jobs itself with RunJob (plugin run without a daemon).
	NoDispatch bool
	// Steps run these discovered plugins in process instead of spawning
	// them (ductile bench --in-process).
	Steps map[string]pluginhost.Step
	// Secrets resolves webhook secret_refs (the auth registry's secrets);
	// nil: the secrets: mapping of the config in force.
	Secrets func() auth.Secrets
	// API is what the HTTP API (config api:) is built with.
	API APIOptions
	// Alerts receives, besides the log, what the operator must see at
	// once on the terminal the daemon was started from (system start:
	// stderr): a front door that could not open. nil: the log alone.
	Alerts io.Writer
}

// Daemon is a running Ductile: it holds the state directory's lock.
type Daemon struct {
	Ledger     *ledger.Ledger
	Projector  *projections.Projector
	Dispatcher *dispatch.Dispatcher // nil with NoDispatch
	Scheduler  *scheduler.Scheduler // nil with NoDispatch
	// Metrics are served at GET /metrics; the dispatcher reports attempts
	// to it (nil with NoDispatch).
	Metrics  *metrics.Metrics
	Webhooks *webhooks.Server // nil without endpoints, and with NoDispatch
	StateDir string

	log       *slog.Logger
	lock      *Lock
	dispatch  dispatch.Options // what RunJob runs jobs with
	steps     map[string]pluginhost.Step
	current   atomic.Pointer[current]
	reloading sync.Mutex // one Reload at a time
	// reloadsAnswered is the seq the last Reload answered requests up to
	// (config.reload_requested); the ledger's head at Open.
	reloadsAnswered int64
	started         time.Time // when Open began: after: schedules count from it
	// schedules are those applied now, by stream, with their Since (Open
	// and Reload only).
	schedules map[string]schedule.Schedule
	retention *retention // prunes job logs (nil with NoDispatch)
	api       *apiServer // nil with NoDispatch or without api:
	apiState  views.APIState
	report    atomic.Pointer[reportFile] // what system status reads of this daemon (nil with NoDispatch)

	closeOnce sync.Once
	closeErr  error
}

// current is what the daemon runs with: a reload replaces it whole.
type current struct {
	config  *config.Config
	plugins *pluginhost.Registry
	// pipelines are the compiled pipelines with the config, as a command
	// ending a job here moves runs on with them (one per applied config:
	// its cache of recorded versions serves every such command).
	pipelines *commands.Pipelines
	applied   events.ConfigAppliedData
	auth      *auth.Registry // the API's tokens and the webhooks' secrets, from config
	engine    *engine.Engine // the same, as the front ends' runtime
}

// newCurrent is what a daemon that applied cfg decides with: its Engine's
// parts, the one pipeline runtime shared.
func newCurrent(l *ledger.Ledger, cfg *config.Config, reg *pluginhost.Registry, set *pipeline.Set, applied events.ConfigAppliedData) *current {
	eng := engine.New(engine.Options{Ledger: l, Config: cfg, Applied: applied, Plugins: reg, Pipelines: set})
	return &current{config: cfg, plugins: reg, pipelines: eng.PipelineRuntime(), applied: applied, auth: eng.Auth(), engine: eng}
}

// Config is the config the daemon runs with now (read-only).
func (d *Daemon) Config() *config.Config { return d.current.Load().config }

// Plugins are the plugins the daemon runs now.
func (d *Daemon) Plugins() *pluginhost.Registry { return d.current.Load().plugins }

// Open takes the lock, opens and migrates the ledger, loads plugins (a
// daemon records what it loaded: config.applied, and runs their init
// commands: InitPlugins), brings
// the projections up to date, recovers jobs a crashed process left running,
// and starts the projector and dispatcher. Close stops them.
func Open(ctx context.Context, opts Options) (_ *Daemon, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg := opts.Config
	if cfg == nil {
		cfg = config.Default()
	}
	if unset := cfg.Unset(); len(unset) > 0 && !opts.NoDispatch {
		// A daemon uses every value: its own environment must set them.
		return nil, &config.ValidationError{Errors: unset}
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	role := RoleDaemon
	if opts.NoDispatch {
		role = RoleCLI
	}
	lock, err := AcquireLock(opts.StateDir, role)
	if err != nil {
		return nil, err
	}
	d := &Daemon{StateDir: opts.StateDir, log: log.With("component", "daemon"), lock: lock, steps: opts.Steps, started: time.Now()}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()

	lopts := opts.Ledger
	lopts.Logger = log
	if !opts.NoDispatch {
		lopts.OnWriteHealth = func(ledger.WriteHealth) { d.report.Load().update(d) }
	}
	if d.Ledger, err = ledger.Open(ctx, DBPath(opts.StateDir), lopts); err != nil {
		return nil, err
	}
	// Reload requests recorded before this start were another daemon's.
	if d.reloadsAnswered, err = d.Ledger.LastSeq(ctx); err != nil {
		return nil, err
	}
	// A daemon reports skipped plugins as errors; a plugin run that takes
	// its place for one job names the skipped plugin it was asked for in
	// its own error, and the others only with --verbose.
	pluginLog := log
	if opts.NoDispatch {
		pluginLog = slog.New(demoted{log.Handler()})
	}
	reg, err := LoadPlugins(opts.StateDir, cfg, pluginLog)
	if err != nil {
		return nil, err
	}
	for name, step := range opts.Steps {
		p, ok := reg.Get(name)
		if !ok {
			return nil, fmt.Errorf("run plugin %q in process: it did not load", name)
		}
		p.Step = step
	}
	set, skippedPipelines, err := CompilePipelines(cfg, reg, pluginLog)
	if err != nil {
		return nil, err
	}
	applied := Applied(reg, cfg, "start")
	applied.StartedAt = commands.Time(d.started)
	applied.Pipelines, applied.SkippedPipelines = appliedPipelines(set), skippedPipelines
	d.current.Store(newCurrent(d.Ledger, cfg, reg, set, applied))
	if !opts.NoDispatch {
		// The schedules the previous daemon ran count on where unchanged.
		prev, ok, err := LastApplied(ctx, d.Ledger)
		if err != nil {
			return nil, err
		}
		if ok {
			d.schedules = previousSchedules(prev.ConfigAppliedData, d.started)
		}
		// What it runs with, for the CLI to check enqueues against.
		if _, err := recordApplied(ctx, d.Ledger, d.current.Load().applied); err != nil {
			return nil, err
		}
		// Before any job of theirs can start; bounded by timeouts.init.
		if _, err := InitPlugins(ctx, InitOptions{Ledger: d.Ledger, Plugins: reg, Config: cfg, Logger: log, Grace: opts.Grace}); err != nil {
			return nil, err
		}
	}

	if damage := d.Ledger.Damage(); damage != nil && damage.Projections {
		// Accepted (Options.Ledger.AllowDamaged): the projections were
		// built from events the log no longer holds. Rebuild them from
		// what it holds, or the projector would skip new events up to the
		// old checkpoint.
		cp, err := projections.Rebuild(ctx, d.Ledger, 0)
		if err != nil {
			return nil, fmt.Errorf("rebuild the projections of a damaged ledger: %w", err)
		}
		d.log.Warn("rebuilt the projections from the damaged ledger as it is", "checkpoint", cp)
	}
	d.Projector = projections.New(d.Ledger, projections.Options{Logger: log})
	if _, err := d.Projector.CatchUp(ctx); err != nil {
		return nil, fmt.Errorf("bring projections up to date: %w", err)
	}
	if err := d.recoverOrphans(ctx); err != nil {
		return nil, err
	}
	d.Projector.Start(ctx)
	var observer dispatch.Observer
	if !opts.NoDispatch {
		d.Metrics = metrics.New(metrics.Options{Ledger: d.Ledger, Projector: d.Projector, Logger: log})
		observer = d.Metrics
	}
	d.dispatch = dispatch.Options{
		Ledger: d.Ledger, Projector: d.Projector, Config: cfg, Plugins: reg, Pipelines: set, Logger: log,
		MaxWorkers: opts.MaxWorkers, Grace: opts.Grace, DrainTimeout: opts.DrainTimeout, Observer: observer,
	}
	if !opts.NoDispatch {
		d.Dispatcher = dispatch.New(d.dispatch)
		d.Dispatcher.Start(ctx)
		d.retention = &retention{ledger: d.Ledger, projector: d.Projector, log: d.log,
			keep: func() time.Duration { return d.Config().Service.JobLogRetention }}
		d.retention.start(ctx)
		d.startScheduler(ctx, log)
		if err := d.startAPI(opts.API); err != nil {
			return nil, err
		}
		if err := d.startWebhooks(cfg, opts.Secrets, log); err != nil {
			return nil, err
		}
		report, err := openReport(opts.StateDir)
		if err != nil {
			return nil, err
		}
		d.report.Store(report)
		report.update(d)
	}
	return d, nil
}

// RunJob runs one job here and now until it is terminal (dispatch.RunJob):
// what plugin run does, on a daemon opened with NoDispatch.
func (d *Daemon) RunJob(ctx context.Context, id string) error {
	return dispatch.RunJob(ctx, d.dispatch, id)
}

// Close drains the dispatcher, stops the projector and brings the
// projections up to date one last time (so what the last jobs recorded is
// readable at once), closes the ledger and releases the lock, in that order.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.close() })
	return d.closeErr
}

func (d *Daemon) close() error {
	// The front doors first: requests in flight finish while the ledger is open.
	errs := []error{d.stopAPI()}
	if d.Webhooks != nil {
		errs = append(errs, d.Webhooks.Close())
	}
	if d.Scheduler != nil {
		d.Scheduler.Stop()
	}
	if d.retention != nil {
		d.retention.stop()
	}
	if d.Dispatcher != nil {
		d.Dispatcher.Stop()
	}
	if d.Projector != nil {
		d.Projector.Stop()
		if _, err := d.Projector.CatchUp(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	if d.Ledger != nil {
		errs = append(errs, d.Ledger.Close())
	}
	errs = append(errs, d.report.Load().close(), d.lock.Release())
	return errors.Join(errs...)
}

// Run opens a daemon, blocks until ctx is done, then closes it.
func Run(ctx context.Context, opts Options) error {
	d, err := Open(ctx, opts)
	if err != nil {
		return err
	}
	d.log.Info("ductile started", "state_dir", opts.StateDir, "pid", os.Getpid(),
		"head", d.Ledger.Head(), "plugins", len(d.Plugins().List()), "max_workers", d.Config().Service.MaxWorkers)
	if api := d.APIState(); api.Down() && opts.Alerts != nil {
		fmt.Fprintf(opts.Alerts, "ductile: running WITHOUT the HTTP API: %s\n", api.Off)
	}
	sd := notifier{log: d.log}
	sd.ready(fmt.Sprintf("running %d plugins", len(d.Plugins().List())))
	watching, stopWatchdog := context.WithCancel(ctx)
	var watchdog sync.WaitGroup
	watchdog.Go(func() { sd.watchdog(watching, d.Ledger) })
	// SIGHUP reloads the config (spec §11.3); ductile system reload sends it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for waiting := true; waiting; {
		select {
		case <-hup:
			d.log.Info("SIGHUP received: reloading the config", "config", d.Config().Source)
			sd.reloading()
			d.Reload(ctx, false) // it logs and records what happened
			sd.ready(fmt.Sprintf("running %d plugins", len(d.Plugins().List())))
		case <-ctx.Done():
			waiting = false
		}
	}
	d.log.Info("ductile stopping", "reason", context.Cause(ctx).Error())
	sd.stopping()
	stopWatchdog()
	watchdog.Wait()
	err = d.Close()
	d.log.Info("ductile stopped")
	return err
}

// LoadPlugins unpacks the bundled plugins into the state directory and
// discovers plugins under the config's plugin_roots, then the bundled root
// (first match wins, so a root can override a bundled plugin). Plugins that
// fail validation are logged and skipped; the others load.
func LoadPlugins(stateDir string, cfg *config.Config, log *slog.Logger) (*pluginhost.Registry, error) {
	reg, problems, err := loadPlugins(stateDir, cfg, log)
	if err != nil {
		return nil, err
	}
	for _, p := range problems {
		level := slog.LevelError
		if errors.Is(p, pluginhost.ErrShadowed) {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "plugin skipped", "component", "pluginhost", "err", p.Error())
	}
	return reg, nil
}

// loadPlugins is LoadPlugins returning the plugins and roots discovery
// skipped instead of logging them.
func loadPlugins(stateDir string, cfg *config.Config, log *slog.Logger) (*pluginhost.Registry, []error, error) {
	if err := plugins.Unpack(BundledPluginsDir(stateDir)); err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	reg, problems := pluginhost.Discover(pluginRoots(stateDir, cfg), discoverOptions(cfg, log))
	return reg, problems, nil
}

// demoted is a log handler that passes every record on at debug level.
type demoted struct{ slog.Handler }

func (h demoted) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, r)
}

func (h demoted) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoted{h.Handler.WithAttrs(attrs)}
}
func (h demoted) WithGroup(name string) slog.Handler { return demoted{h.Handler.WithGroup(name)} }

// recoverOrphans re-queues (or buries) jobs left running by a process that
// died (spec §11.2). It runs while we hold the lock, before dispatching, so
// nothing else can be running them.
func (d *Daemon) recoverOrphans(ctx context.Context) error {
	var ids []string
	err := d.Ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ListActiveJobs(conn, func(r queries.ListActiveJobsRow) error {
			ids = append(ids, r.ID)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("find orphaned jobs: %w", err)
	}
	for _, id := range ids {
		// Its plugin first: the job must not run again beside it.
		ended, err := d.endOrphanPlugin(ctx, id)
		if err != nil {
			d.log.Error("could not end the plugin of a job left running by a stopped process; it may run twice at once", "job_id", id, "err", err)
		}
		reason := ""
		if ended != "" {
			reason = commands.OrphanReason + "; " + ended
		}
		res, err := commands.RecoverJob(ctx, d.Ledger, commands.Recover{JobID: id, Reason: reason, Now: time.Now(), Pipelines: d.pipelineRuntime()})
		if err != nil {
			return err
		}
		if res.Recovered {
			d.log.Warn("recovered a job left running by a stopped process", "job_id", id,
				"attempt", res.Attempt, "next_attempt", res.NextAttempt, "status", res.Status)
		}
	}
	if len(ids) > 0 {
		if _, err := d.Projector.CatchUp(ctx); err != nil {
			return err
		}
	}
	return nil
}

// DiscoverPlugins discovers plugins as the daemon will at its next start,
// returning the plugins that failed validation instead of logging them
// (plugin list and config check show them), and writes nothing to the state
// directory, which may not exist (a mistyped --state-dir) or be read-only.
// The bundled plugins are unpacked into a temporary directory, removed
// before it returns, and reported where the daemon unpacks and runs them.
// err is set only if they could not be unpacked.
func DiscoverPlugins(stateDir string, cfg *config.Config, log *slog.Logger) (reg *pluginhost.Registry, problems []error, err error) {
	tmp, err := os.MkdirTemp("", "ductile-plugins-")
	if err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := plugins.Unpack(tmp); err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	// Discovery resolves symlinks: match the temporary root as it will.
	real, err := filepath.EvalSymlinks(tmp)
	if err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	reg, problems = pluginhost.Discover(append(append([]string{}, cfg.PluginRoots...), real), discoverOptions(cfg, log))
	bundled := BundledPluginsDir(stateDir)
	moved := func(path string) string {
		if rel, err := filepath.Rel(real, path); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(bundled, rel)
		}
		return path
	}
	for _, p := range reg.List() {
		p.Dir, p.Entrypoint = moved(p.Dir), moved(p.Entrypoint)
	}
	for _, problem := range problems {
		var pe *pluginhost.PluginError
		if errors.As(problem, &pe) {
			pe.Dir = moved(pe.Dir)
		}
	}
	return reg, problems, nil
}

func discoverOptions(cfg *config.Config, log *slog.Logger) pluginhost.DiscoverOptions {
	return pluginhost.DiscoverOptions{AllowSymlinks: cfg.Service.AllowSymlinks, Config: pluginConfigs(cfg), Logger: log}
}

func pluginRoots(stateDir string, cfg *config.Config) []string {
	return append(append([]string{}, cfg.PluginRoots...), BundledPluginsDir(stateDir))
}

func pluginConfigs(cfg *config.Config) map[string]map[string]any {
	m := map[string]map[string]any{}
	for name, pc := range cfg.Plugins {
		m[name] = pc.Config
	}
	return m
}
