package main

import (
	"context"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

// serviceSettings is the config whose service settings (job_log_retention,
// dedupe_ttl) ledger prune and ledger archive apply: the settings the
// daemon holding the state directory recorded in its newest config.applied,
// or, with no daemon running, this process's config.
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
