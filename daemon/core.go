package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/projections"
)

// DBPath is the ledger file inside a state directory.
func DBPath(stateDir string) string { return filepath.Join(stateDir, "ductile.db") }

// BundledPluginsDir is where the plugins embedded in the binary are unpacked.
func BundledPluginsDir(stateDir string) string { return filepath.Join(stateDir, "plugins") }

// CoreOptions configure a Core.
type CoreOptions struct {
	StateDir string
	Config   *config.Config // nil: config.Default()
	Logger   *slog.Logger
	// Ledger options (tests and benchmarks may relax durability).
	Ledger ledger.Options
	// Role is who holds the state directory's lock: RoleDaemon, or RoleCLI
	// (the default) for a process that runs its own jobs only. A daemon
	// reports the plugins discovery skipped as errors; any other holder
	// at debug level, as it names the one it was asked for in its own
	// error.
	Role string
	// Starting, if set, runs once the lock is held, the ledger open and
	// the Engine built, before the projections are brought up to date and
	// recovery runs: what the holder must record first (a daemon's
	// config.applied and its plugins' inits). Its error fails OpenCore.
	Starting func(ctx context.Context, c *Core) error
}

// Core is what every process acting on a state directory holds: its lock,
// the ledger, the projector keeping the projections up to date, and the
// Engine of the config applied. Opening it recovers the jobs a stopped
// process left running. A daemon runs its services on a Core; plugin run
// without a daemon runs its one job on one (RunJob).
type Core struct {
	Ledger    *ledger.Ledger
	Projector *projections.Projector
	StateDir  string

	logger  *slog.Logger // the process's: each part it runs names its own component
	log     *slog.Logger // the core's own
	lock    *Lock
	engine  atomic.Pointer[engine.Engine] // the runtime of the config applied now: a daemon's reload swaps it whole
	started time.Time                     // when OpenCore began: after: schedules count from it
	// opened is the ledger's last seq when it opened: what was recorded
	// before this process held the lock.
	opened int64

	closeOnce sync.Once
	closeErr  error
}

// OpenCore takes the lock, opens and migrates the ledger, loads plugins and
// compiles pipelines into the Engine, brings the projections up to date,
// recovers jobs a crashed process left running, and starts the projector.
// Close stops it.
func OpenCore(ctx context.Context, opts CoreOptions) (_ *Core, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg := opts.Config
	if cfg == nil {
		cfg = config.Default()
	}
	role := opts.Role
	if role == "" {
		role = RoleCLI
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	lock, err := AcquireLock(opts.StateDir, role)
	if err != nil {
		return nil, err
	}
	c := &Core{StateDir: opts.StateDir, logger: log, log: log.With("component", "daemon"), lock: lock, started: time.Now()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()

	lopts := opts.Ledger
	lopts.Logger = log
	if c.Ledger, err = ledger.Open(ctx, DBPath(opts.StateDir), lopts); err != nil {
		return nil, err
	}
	if c.opened, err = c.Ledger.LastSeq(ctx); err != nil {
		return nil, err
	}
	pluginLog := log
	if role != RoleDaemon {
		pluginLog = slog.New(demoted{log.Handler()})
	}
	reg, err := LoadPlugins(opts.StateDir, cfg, pluginLog)
	if err != nil {
		return nil, err
	}
	fleet := engine.NewFleet(engine.FleetOptions{LeasePeriod: cfg.Service.LeasePeriod})
	workers, err := fleet.Workers(ctx, c.Ledger) // the pipelines compile against the remote plugins they register
	if err != nil {
		return nil, err
	}
	set, skippedPipelines, err := CompilePipelines(cfg, reg, RegisteredPlugins(workers), pluginLog)
	if err != nil {
		return nil, err
	}
	applied := Applied(reg, cfg, "start")
	applied.StartedAt = commands.Time(c.started)
	applied.Pipelines, applied.SkippedPipelines = appliedPipelines(set), skippedPipelines
	c.engine.Store(engine.New(engine.Options{Ledger: c.Ledger, Config: cfg, Applied: applied, Plugins: reg, Pipelines: set,
		Fleet: fleet}))
	if opts.Starting != nil {
		if err := opts.Starting(ctx, c); err != nil {
			return nil, err
		}
	}

	if damage := c.Ledger.Damage(); damage != nil && damage.Projections {
		// Accepted (Options.Ledger.AllowDamaged): the projections were
		// built from events the log no longer holds. Rebuild them from
		// what it holds, or the projector would skip new events up to the
		// old checkpoint.
		cp, err := projections.Rebuild(ctx, c.Ledger, 0)
		if err != nil {
			return nil, fmt.Errorf("rebuild the projections of a damaged ledger: %w", err)
		}
		c.log.Warn("rebuilt the projections from the damaged ledger as it is", "checkpoint", cp)
	}
	c.Projector = projections.New(c.Ledger, projections.Options{Logger: log})
	if _, err := c.Projector.CatchUp(ctx); err != nil {
		return nil, fmt.Errorf("bring projections up to date: %w", err)
	}
	if err := c.recoverOrphans(ctx); err != nil {
		return nil, err
	}
	c.Engine().Fleet().Watch(c.Projector)
	c.Projector.Start(ctx)
	return c, nil
}

// Engine is the runtime of the config applied now: what front ends call.
// A daemon's reload replaces it; a caller keeps the one it loaded for the
// whole of what it does.
func (c *Core) Engine() *engine.Engine { return c.engine.Load() }

// Config is the config applied now (read-only).
func (c *Core) Config() *config.Config { return c.Engine().Config() }

// Plugins are the plugins loaded for the config applied now.
func (c *Core) Plugins() *pluginhost.Registry { return c.Engine().Plugins() }

// RunJob runs one job here and now until it is terminal (dispatch.RunJob),
// with the config applied now: what a process that holds the lock but runs
// no dispatcher does with the job it was asked to run (plugin run without
// a daemon, a sandbox). Not on a Daemon's Core: its dispatcher runs jobs.
func (c *Core) RunJob(ctx context.Context, id string) error {
	e := c.Engine()
	return dispatch.RunJob(ctx, dispatch.Options{Engine: e, Logger: c.logger}, id)
}

// Close stops the projector and brings the projections up to date one last
// time (so what the last jobs recorded is readable at once), closes the
// ledger and releases the lock, in that order.
func (c *Core) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Core) close() error {
	var errs []error
	if c.Projector != nil {
		c.Projector.Stop()
		if _, err := c.Projector.CatchUp(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Ledger != nil {
		errs = append(errs, c.Ledger.Close())
	}
	return errors.Join(append(errs, c.lock.Release())...)
}
