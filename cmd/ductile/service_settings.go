package main

import (
	"context"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

// serviceSettings is the config the daemon holding the state directory
// decides with, as its newest config.applied records it, or, with no daemon
// running, this process's config: the service settings (job_log_retention,
// dedupe_ttl) ledger prune and ledger archive apply, and the job defaults a
// CLI cancel's pipeline step takes. (Compiled pipelines are not needed: a
// run's version is read from the ledger when it is not given.)
func serviceSettings(ctx context.Context, e *env, l *ledger.Ledger) (*config.Config, error) {
	h, err := daemon.Holder(e.stateDir)
	if err != nil {
		return nil, err
	}
	if !h.Daemon() {
		return e.cfg, nil
	}
	set, err := daemonPlugins(ctx, e, l, h.PID)
	if err != nil {
		return nil, err
	}
	return set.config, nil
}
