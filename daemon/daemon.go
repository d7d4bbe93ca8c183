package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// DBPath is the ledger file inside a state directory.
func DBPath(stateDir string) string { return filepath.Join(stateDir, "ductile.db") }

// Options configure a daemon.
type Options struct {
	StateDir string
	Logger   *slog.Logger
	// Ledger options (tests and benchmarks relax durability).
	Ledger ledger.Options
	// Started, if set, is called once everything runs.
	Started func(*Daemon)
}

// Daemon is a running Ductile.
type Daemon struct {
	Ledger    *ledger.Ledger
	Projector *projections.Projector
	log       *slog.Logger
}

// Run takes the lock, opens the ledger, starts every part and blocks until
// ctx is done, then stops the parts in reverse order and releases the lock.
func Run(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	lock, err := AcquireLock(opts.StateDir)
	if err != nil {
		return err
	}
	defer lock.Release()

	lopts := opts.Ledger
	lopts.Logger = log
	l, err := ledger.Open(ctx, DBPath(opts.StateDir), lopts)
	if err != nil {
		return err
	}
	defer l.Close()

	p := projections.New(l, projections.Options{Logger: log})
	p.Start(ctx)
	defer p.Stop()

	d := &Daemon{Ledger: l, Projector: p, log: log}
	log.Info("ductile started", "component", "daemon", "state_dir", opts.StateDir, "pid", os.Getpid(), "head", l.Head())
	if opts.Started != nil {
		opts.Started(d)
	}
	<-ctx.Done()
	log.Info("ductile stopping", "component", "daemon", "reason", context.Cause(ctx).Error())
	return nil
}
