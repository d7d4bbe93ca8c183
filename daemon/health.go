package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
)

// Statuses of a health check that are not recorded: the plugin declares no
// health command, it is disabled, or its config needs a ${VAR} that is not
// set in this process's environment (config.LoadDeferred; the CLI in a
// shell without it): then nothing runs.
const (
	NoHealthCommand events.HealthStatus = "no_health_command"
	HealthDisabled  events.HealthStatus = "disabled"
	HealthUnset     events.HealthStatus = "not_checked"
)

// ErrUnknownPlugin is matched (errors.Is) by the error of CheckHealth for a
// plugin that is not loaded.
var ErrUnknownPlugin = errors.New("unknown plugin")

// HealthOptions configure CheckHealth.
type HealthOptions struct {
	Ledger  *ledger.Ledger
	Plugins *pluginhost.Registry
	Config  *config.Config
	Logger  *slog.Logger
	// Names are the plugins to check (default: every loaded plugin).
	Names []string
	// Grace between SIGTERM and SIGKILL of a plugin (default 5s).
	Grace time.Duration
	// Parallelism bounds the checks run at once (default
	// DefaultLifecycleParallelism).
	Parallelism int
	// Actor is recorded in the events' meta (default events.ActorCLI).
	Actor events.Actor
}

// HealthReport is what one plugin's health check found, now.
type HealthReport struct {
	Plugin     string              `json:"plugin"`
	Status     events.HealthStatus `json:"status"` // healthy, unhealthy, no_health_command or disabled
	Message    string              `json:"message,omitempty"`
	DurationMS int64               `json:"duration_ms"`
}

// CheckHealth runs the health command of each plugin named (every loaded
// one by default) now, at most Parallelism at once, each bounded by the
// plugin's timeouts.health, and records each run as plugin.health_checked.
// A plugin without a health command, or disabled, is reported so and
// nothing runs. The reports are in the order of the names (by name by
// default). The error is the ledger's, or ErrUnknownPlugin before anything
// runs.
func CheckHealth(ctx context.Context, opts HealthOptions) ([]HealthReport, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "pluginhost")
	var plugins []*pluginhost.Plugin
	if len(opts.Names) == 0 {
		plugins = opts.Plugins.List()
	}
	for _, name := range opts.Names {
		p, ok := opts.Plugins.Get(name)
		if !ok {
			return nil, fmt.Errorf("check health: %w %q (see: ductile plugin list)", ErrUnknownPlugin, name)
		}
		plugins = append(plugins, p)
	}
	reports := make([]HealthReport, len(plugins))
	errs := make([]error, len(plugins))
	forEach(len(plugins), opts.Parallelism, func(i int) {
		reports[i], errs[i] = checkOne(ctx, opts, log, plugins[i])
	})
	return reports, errors.Join(errs...)
}

func checkOne(ctx context.Context, opts HealthOptions, log *slog.Logger, p *pluginhost.Plugin) (HealthReport, error) {
	r := HealthReport{Plugin: p.Name}
	pc := opts.Config.Plugin(p.Name)
	if !pc.Enabled {
		r.Status, r.Message = HealthDisabled, fmt.Sprintf("disabled in the config (plugins.%s.enabled: false)", p.Name)
		return r, nil
	}
	if _, ok := p.Command(HealthCommand); !ok {
		r.Status, r.Message = NoHealthCommand, "no health command"
		return r, nil
	}
	if unset := opts.Config.UnsetFor(p.Name); len(unset) > 0 {
		r.Status, r.Message = HealthUnset, "its config needs what this shell does not have: "+unset[0].Error()
		return r, nil
	}
	runID, res, err := runLifecycle(ctx, p, HealthCommand, pc, opts.Grace)
	if err != nil {
		return r, fmt.Errorf("check health of plugin %s: %w", p.Name, err)
	}
	r.DurationMS = res.Duration.Milliseconds()
	r.Status, r.Message = events.Unhealthy, res.Err
	if res.Kind == events.OutcomeOK {
		r.Status, r.Message = events.Healthy, ""
		if res.Response != nil {
			r.Message = res.Response.Result
		}
	}
	r.Message = strings.TrimSpace(r.Message)
	if res.Kind == events.OutcomeCanceled {
		return r, ctx.Err() // not the plugin's answer: nothing to record
	}
	if r.Status == events.Unhealthy {
		log.Warn("plugin unhealthy", "plugin", p.Name, "outcome", string(res.Kind), "err", res.Err)
	}
	err = commands.RecordHealth(context.WithoutCancel(ctx), opts.Ledger, commands.HealthCheck{Plugin: p.Name, Status: r.Status,
		Message: r.Message, Outcome: res.Kind, RunID: runID, Duration: res.Duration, Actor: opts.Actor})
	return r, err
}
