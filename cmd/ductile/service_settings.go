package main

import (
	"context"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/ledger"
)

// serviceSettings is the config the daemon holding the state directory
// decides with, as its newest config.applied records it, or, with no daemon
// running, this process's config: the service settings (job_log_retention,
// dedupe_ttl) ledger prune and ledger archive apply.
func serviceSettings(ctx context.Context, e *env, l *ledger.Ledger) (*config.Config, error) {
	eng, err := settingsEngine(ctx, e, l)
	if err != nil {
		return nil, err
	}
	return eng.Config(), nil
}

// settingsEngine is the Engine of serviceSettings' config acting on l,
// with the plugins the daemon recorded it loaded (none without a daemon:
// nothing is discovered): what a CLI cancel needs, whose pipeline steps take
// the job defaults of that config. (Compiled pipelines are not needed: a
// run's version is read from the ledger when it is not given.)
func settingsEngine(ctx context.Context, e *env, l *ledger.Ledger) (*engine.Engine, error) {
	h, err := daemon.Holder(e.stateDir)
	if err != nil {
		return nil, err
	}
	if !h.Daemon() {
		return engine.New(engine.Options{Ledger: l, Config: e.cfg}), nil
	}
	set, err := daemonEngine(ctx, e, l, h.PID)
	if err != nil {
		return nil, err
	}
	return set.Engine, nil
}
