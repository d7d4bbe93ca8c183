package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

// openLedger opens (creating and migrating if needed) the state directory's
// ledger for a one-shot command that writes. It works while a daemon runs:
// SQLite serialises writers.
func (e *env) openLedger(ctx context.Context) (*ledger.Ledger, error) {
	if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
		return nil, failf("create state dir: %v", err)
	}
	l, err := ledger.Open(ctx, daemon.DBPath(e.stateDir), ledger.Options{Logger: e.quietLogger()})
	return l, ledgerError(err)
}

// ledgerError says what to do about an error opening the ledger to write:
// a damaged ledger is refused until someone accepts the damage.
func ledgerError(err error) error {
	var damaged *ledger.DamagedError
	if errors.As(err, &damaged) && damaged.Check.Lagging {
		return failf("%v\n(if you restored this ledger from a backup or a replica, adopt it with: ductile ledger adopt-restore "+
			"(docs/operations.md); otherwise events were removed: ductile ledger verify)", err)
	}
	if errors.As(err, &damaged) {
		return failf("%v\n(details: ductile ledger verify; restore the ledger from a backup, "+
			"or accept the damage and go on with: ductile system start --%s)", err, allowDamagedName)
	}
	return err
}

// openExistingLedger is openLedger for a command that changes what is
// already there (a job's cancel or retry, a replay in place): on a missing
// ledger it creates nothing and says where it looked.
func (e *env) openExistingLedger(ctx context.Context) (*ledger.Ledger, error) {
	if _, err := os.Stat(daemon.DBPath(e.stateDir)); errors.Is(err, fs.ErrNotExist) {
		return nil, e.noLedger()
	}
	return e.openLedger(ctx)
}

// noLedger is the error for a state directory with no ledger in it.
func (e *env) noLedger() error {
	return notFoundf("no ledger at %s: nothing has run on the state directory %s yet "+
		"(check --state-dir, $DUCTILE_STATE_DIR and the config's state_dir; ductile system start creates it)",
		daemon.DBPath(e.stateDir), e.stateDir)
}

// readLedger opens the state directory's ledger read-only, for a command
// that only reads: it creates, migrates and writes nothing, so it works on
// a read-only mount or file. A missing ledger, or one whose schema is
// behind this binary, is an error that says where it looked and what to do.
func (e *env) readLedger(ctx context.Context) (*ledger.Ledger, error) {
	path := daemon.DBPath(e.stateDir)
	l, err := ledger.Open(ctx, path, ledger.Options{ReadOnly: true, Logger: e.quietLogger()})
	var schema *ledger.SchemaError
	switch {
	case errors.Is(err, ledger.ErrNoLedger):
		return nil, e.noLedger()
	case errors.As(err, &schema):
		return nil, failf("%v: run ductile system migrate --state-dir %s (or start the daemon, which migrates), then this again", err, e.stateDir)
	}
	return l, err
}

// withExistingLedger is the prologue of every command that changes what is
// in the ledger: resolve the environment, open the ledger
// (openExistingLedger), close it afterwards.
func withExistingLedger(fn func(c *cli.Context, e *env, l *ledger.Ledger) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		e, err := loadEnv(c)
		if err != nil {
			return err
		}
		l, err := e.openExistingLedger(c.Context)
		if err != nil {
			return err
		}
		defer l.Close()
		return fn(c, e, l)
	}
}

// withReadLedger is withExistingLedger for a command that only reads: the ledger is
// opened read-only (readLedger). With the state directory given (--state-dir or
// $DUCTILE_STATE_DIR), a config file that does not load only warns: what is in the
// ledger can be read without it, and a broken file is when an operator needs to.
func withReadLedger(fn func(c *cli.Context, e *env, l *ledger.Ledger) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		e, cfgErr := loadEnv(c)
		if cfgErr != nil {
			var err error
			if e, err = daemonEnv(c); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "warning: config not loaded (%v); reading the ledger of %s without it\n", cfgErr, e.stateDir)
		}
		l, err := e.readLedger(c.Context)
		if err != nil {
			return err
		}
		defer l.Close()
		return fn(c, e, l)
	}
}
