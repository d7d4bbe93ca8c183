package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/metrics"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/schedule"
	"github.com/ductile/ductile/scheduler"
	"github.com/ductile/ductile/views"
	"github.com/ductile/ductile/webhooks"
)

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

// Daemon is a running Ductile: a Core, held as the daemon (RoleDaemon),
// and the long-running services on it (services.go).
type Daemon struct {
	*Core
	Dispatcher *dispatch.Dispatcher
	Scheduler  *scheduler.Scheduler
	// Metrics are served at GET /metrics; the dispatcher reports attempts
	// to it.
	Metrics  *metrics.Metrics
	Webhooks *webhooks.Server // nil without endpoints

	grace time.Duration // between SIGTERM and SIGKILL of a plugin
	// steps run these plugins in process instead of spawning them, at
	// start and after each reload (OpenBench).
	steps     map[string]pluginhost.Step
	reloading sync.Mutex // one Reload at a time
	// reloadsAnswered is the seq the last Reload answered requests up to
	// (config.reload_requested); the ledger's head at Open.
	reloadsAnswered int64
	// schedules are those applied now, by stream, with their Since (Open
	// and Reload only).
	schedules map[string]schedule.Schedule
	// scheduled are the schedules last handed to the scheduler, in its
	// order, for the API (GET /schedules) to read from its goroutines.
	scheduled atomic.Pointer[[]schedule.Schedule]
	retention *retention // prunes job logs
	sweeper   *sweeper   // ends remote attempts whose lease ran out
	api       *apiServer // nil without api:
	apiState  views.APIState
	report    atomic.Pointer[reportFile] // what system status reads of this daemon
	// tokens are the API tokens the guard checks (nil: the Engine's). A
	// reload swaps them just before it records config.applied, as it does
	// the certificate: a system reload that sees the record sees the new
	// tokens answer.
	tokens atomic.Pointer[auth.Registry]

	closeOnce sync.Once
	closeErr  error
}

// Open opens the Core as the daemon, recording what it loaded
// (config.applied) and running the plugins' init commands (InitPlugins)
// before recovery, then starts the services: dispatcher, scheduler, retention, HTTP API and
// webhooks. Close stops them.
func Open(ctx context.Context, opts Options) (*Daemon, error) {
	return open(ctx, opts, nil)
}

func open(ctx context.Context, opts Options, steps map[string]pluginhost.Step) (_ *Daemon, err error) {
	cfg := opts.Config
	if cfg == nil {
		cfg = config.Default()
	}
	if unset := cfg.Unset(); len(unset) > 0 {
		// A daemon uses every value: its own environment must set them.
		return nil, &config.ValidationError{Errors: unset}
	}
	d := &Daemon{grace: opts.Grace, steps: steps}
	lopts := opts.Ledger
	lopts.OnWriteHealth = func(ledger.WriteHealth) { d.report.Load().update(d) }
	d.Core, err = OpenCore(ctx, CoreOptions{StateDir: opts.StateDir, Config: cfg, Logger: opts.Logger, Ledger: lopts, Role: RoleDaemon,
		Starting: func(ctx context.Context, c *Core) error {
			d.Core = c
			return d.starting(ctx, opts.Grace)
		}})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if err := d.startServices(ctx, opts); err != nil {
		return nil, err
	}
	return d, nil
}

// starting is what the daemon does first on its Core, before recovery: it
// runs the steps' plugins in process (OpenBench), records config.applied
// and runs the plugins' inits.
func (d *Daemon) starting(ctx context.Context, grace time.Duration) error {
	// Reload requests recorded before this start were another daemon's.
	d.reloadsAnswered = d.opened
	for name, step := range d.steps {
		p, ok := d.Plugins().Get(name)
		if !ok {
			return fmt.Errorf("run plugin %q in process: it did not load", name)
		}
		p.Step = step
	}
	// The schedules the previous daemon ran count on where unchanged.
	prev, ok, err := LastApplied(ctx, d.Ledger)
	if err != nil {
		return err
	}
	if ok {
		d.schedules = previousSchedules(prev.ConfigAppliedData, d.started)
	}
	// What it runs with, for the CLI to check enqueues against.
	if _, err := commands.RecordApplied(ctx, d.Ledger, d.Engine().Applied()); err != nil {
		return err
	}
	// Before any job of theirs can start; bounded by timeouts.init.
	_, err = InitPlugins(ctx, InitOptions{Ledger: d.Ledger, Plugins: d.Plugins(), Config: d.Config(), Logger: d.logger, Grace: grace})
	return err
}

// Close stops the services (the front doors first, then the scheduler and
// retention, then it drains the dispatcher), then closes the Core.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.close() })
	return d.closeErr
}

func (d *Daemon) close() error {
	errs := d.stopServices()
	// The report is gone before the lock is free: a next daemon's is its own.
	errs = append(errs, d.report.Load().close(), d.Core.Close())
	return errors.Join(errs...)
}

// Run opens a daemon, blocks until ctx is done, then closes it.
func Run(ctx context.Context, opts Options) error {
	d, err := Open(ctx, opts)
	if err != nil {
		return err
	}
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
