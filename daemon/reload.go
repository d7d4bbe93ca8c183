package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/views"
)

// ReloadCheck is what a reload of a config file finds before it applies
// anything: the config, its plugins and pipelines, and every problem.
type ReloadCheck struct {
	// Config, Plugins and Pipelines are what the reload would run with; nil
	// when the files do not load (Config), or the pipelines do not compile.
	Config    *config.Config
	Plugins   *pluginhost.Registry
	Pipelines *pipeline.Set
	// SkippedPipelines are those a forced reload would not run (a uses
	// step names a plugin that did not load).
	SkippedPipelines []events.SkippedPipeline
	// Findings are every error and warning, as config check reports them.
	Findings
	// Forceable says the errors are all of the plugins (CheckConfig), so
	// that a reload asked with force applies the config anyway.
	Forceable bool
}

// CheckReload loads the config file at source (the built-in defaults for
// ""), discovers its plugins with discover and checks the one against the
// other (CheckConfig), as a reload does before it applies anything: the
// daemon's own reload, and system reload --dry-run. deferEnv leaves a
// ${VAR} this process's environment does not set as a warning
// (config.LoadDeferred: the dry run, in a shell, while the daemon resolves
// them in its own environment). err is set only when nothing could be
// checked (the file unreadable, the bundled plugins not unpacked).
// remote is the plugins as registered remote workers serve them (nil: none
// known), which pipelines compile against (CompilePipelines).
func CheckReload(source string, deferEnv bool, discover func(*config.Config) (*pluginhost.Registry, []error, error), remote RemotePluginOf) (ReloadCheck, error) {
	rc := ReloadCheck{Findings: Findings{Errors: []string{}, Warnings: []string{}}}
	var refused []config.FieldError
	if source == "" {
		rc.Config = config.Default()
	} else {
		var err error
		if rc.Config, refused, err = config.Examine(source, deferEnv); err != nil {
			return ReloadCheck{}, err
		}
	}
	rc.add(refused...)
	if rc.Config == nil {
		return rc, nil
	}
	reg, problems, err := discover(rc.Config)
	if err != nil {
		return ReloadCheck{}, err
	}
	rc.Plugins = reg
	f, err := CheckConfig(rc.Config, reg, problems, remote)
	if err != nil {
		return ReloadCheck{}, err
	}
	rc.Errors, rc.Warnings = append(rc.Errors, f.Errors...), append(rc.Warnings, f.Warnings...)
	// Logged by the caller once it applies them.
	set, skipped, err := CompilePipelines(rc.Config, reg, remote, slog.New(slog.DiscardHandler))
	if err == nil {
		rc.Pipelines, rc.SkippedPipelines = set, skipped
	}
	rc.Forceable = len(refused) == 0 && err == nil
	return rc, nil
}

// Refused is why the reload is refused, or nil: a *ReloadRefusedError when
// rc found errors, unless force and every one is Forceable.
func (rc ReloadCheck) Refused(force bool) error {
	if len(rc.Errors) == 0 || force && rc.Forceable {
		return nil
	}
	return &ReloadRefusedError{Errors: rc.Errors, Forceable: rc.Forceable}
}

// ReloadRefusedError is a reload refused for the problems of the config
// it would load: every one of them.
type ReloadRefusedError struct {
	Errors    []string
	Forceable bool // a reload asked with force would apply it
}

func (e *ReloadRefusedError) Error() string { return strings.Join(e.Errors, "\n") }

// Reload reads the daemon's config file again and discovers its plugins
// (spec §11.3), and checks them as ductile config check does (CheckReload).
// A config with any error changes nothing: Reload records
// config.reload_failed with every error and returns them; the old config
// keeps running, its listeners and schedules too. With force (the argument,
// or a config.reload_requested asking for it since the last reload), a
// config whose errors are all of the plugins (a plugin skipped, a route or
// pipeline to one that is not there) is applied anyway, the errors
// recorded with it; the files' own errors (YAML, keys, values, integrity)
// are never forced. A config applied becomes what the daemon decides with
// at once: the dispatcher's plugins, settings, routes and pool, the
// scheduler's schedules; jobs already started finish with the settings they
// started with. It records config.applied (reason reload, with the changes
// and the warnings) and ends the queued jobs of plugins the new config
// removed or disabled, canceled with the reason. Reloads run one at a time.
func (d *Daemon) Reload(ctx context.Context, force bool) (events.ConfigAppliedData, error) {
	d.reloading.Lock()
	defer d.reloading.Unlock()
	through, err := d.Ledger.LastSeq(ctx)
	if err != nil {
		return events.ConfigAppliedData{}, err
	}
	requested, err := d.forceRequested(ctx, through)
	if err != nil {
		return events.ConfigAppliedData{}, err
	}
	force = force || requested
	workers, err := d.Engine().Workers(ctx)
	if err != nil {
		return events.ConfigAppliedData{}, err
	}
	rc, err := CheckReload(d.Config().Source, false, func(cfg *config.Config) (*pluginhost.Registry, []error, error) {
		return loadPlugins(d.StateDir, cfg, d.log)
	}, RegisteredPlugins(workers))
	if err == nil {
		err = rc.Refused(force)
	}
	if err != nil {
		failed := events.ReloadFailedData{PID: os.Getpid(), Through: through, Error: err.Error()}
		var refused *ReloadRefusedError
		if errors.As(err, &refused) {
			failed.Errors, failed.Forceable = refused.Errors, refused.Forceable
		}
		d.log.Error("config reload refused: keeping the config in use", "errors", failed.Error, "forceable", failed.Forceable)
		return events.ConfigAppliedData{}, errors.Join(err, commands.RecordReloadFailed(ctx, d.Ledger, failed))
	}
	cfg, reg, set := rc.Config, rc.Plugins, rc.Pipelines
	for name, step := range d.steps {
		if p, ok := reg.Get(name); ok {
			p.Step = step
		}
	}
	if cfg.StateDir != "" && cfg.StateDir != d.Config().StateDir {
		rc.Warnings = append(rc.Warnings, fmt.Sprintf("state_dir changed in the config (%s): a reload cannot move the ledger; restart the daemon to use it (in use: %s)", cfg.StateDir, d.StateDir))
	}
	if lp, inUse := cfg.Service.LeasePeriod, d.Engine().Fleet().LeasePeriod(); lp != 0 && lp != inUse {
		// The Fleet, and the leases it holds, outlive a reload.
		rc.Warnings = append(rc.Warnings, fmt.Sprintf("service.lease_period changed in the config (%s): a reload keeps the lease period; restart the daemon to use it (in use: %s)", lp, inUse))
	}
	old := d.Engine().Applied()
	a := Applied(reg, cfg, "reload")
	a.Pipelines, a.SkippedPipelines = appliedPipelines(set), rc.SkippedPipelines
	a.Through, a.StartedAt = through, old.StartedAt
	a.Changes = config.DiffSettings(a.Settings, old.Settings)
	a.Errors, a.Warnings = rc.Errors, rc.Warnings
	// A plugin new to the daemon, or whose config changed, runs init before
	// any job of it runs with the new settings (InitPlugins skips the
	// others; each is bounded by its timeouts.init); a failure marks it
	// unhealthy. Then the record, and only once it is in the ledger does
	// the daemon run with the new config: the ledger never says one config
	// while the daemon runs another.
	if _, err := InitPlugins(ctx, InitOptions{Ledger: d.Ledger, Plugins: reg, Config: cfg, Logger: d.log, Grace: d.grace}); err != nil {
		return events.ConfigAppliedData{}, fmt.Errorf("config not reloaded: recording plugin inits failed: %w", err)
	}
	// Before the record, so a system reload that sees it sees the new
	// certificate served too.
	d.reloadAPICertificate(cfg)
	e := engine.New(engine.Options{Ledger: d.Ledger, Config: cfg, Applied: a, Plugins: reg, Pipelines: set, Fleet: d.Engine().Fleet()})
	prevTokens := d.apiTokens()
	d.tokens.Store(e.Auth()) // before the record too: a system reload that sees it sees the new tokens answer
	seq, err := commands.RecordApplied(ctx, d.Ledger, a)
	if err != nil {
		d.tokens.Store(prevTokens)
		return events.ConfigAppliedData{}, fmt.Errorf("config not reloaded: %w", err)
	}
	d.Dispatcher.Apply(e)
	d.engine.Store(e)
	d.applySchedules(time.Now())
	for _, e := range a.Errors {
		d.log.Error("config reloaded with an error (forced)", "error", e)
	}
	for _, w := range a.Warnings {
		d.log.Warn("config reloaded with a warning", "warning", w)
	}
	for _, p := range a.SkippedPipelines {
		d.log.Warn("pipeline skipped: it uses a plugin that did not load; fix or install the plugin (see: ductile plugin list), then reload",
			"pipeline", p.Name, "reason", p.Reason)
	}
	d.log.Info("config reloaded", "changes", len(a.Changes), "plugins", len(a.Plugins), "skipped", len(a.Skipped), "forced", len(a.Errors) > 0, "seq", seq)
	if err := d.endOrphanedQueuedJobs(ctx, old, a, seq); err != nil {
		return a, fmt.Errorf("config reloaded, but ending the queued jobs of removed plugins failed: %w", err)
	}
	return a, nil
}

// forceRequested reports whether a config.reload_requested for this daemon
// asked for force since the last reload, up to through (the seq this
// reload answers to), and marks them answered.
func (d *Daemon) forceRequested(ctx context.Context, through int64) (bool, error) {
	force := false
	for after := d.reloadsAnswered; after < through; {
		last, err := d.Ledger.ReadFrom(ctx, after, 0, ledger.Filter{Stream: events.SystemStream, Type: events.ConfigReloadRequested},
			func(ev ledger.Event) error {
				var r events.ReloadRequestedData
				if ev.Seq <= through && json.Unmarshal(ev.Data, &r) == nil && r.PID == os.Getpid() && r.Force {
					force = true
				}
				return nil
			})
		if err != nil {
			return false, fmt.Errorf("read reload requests: %w", err)
		}
		if last == after {
			break
		}
		after = last
	}
	d.reloadsAnswered = through
	return force, nil
}

// endOrphanedQueuedJobs cancels the queued jobs of the plugins old ran
// that the config applied at seq (a) no longer runs: removed, disabled, or
// skipped. The projections are brought to seq first, so every job enqueued
// before the record is seen; a CLI enqueue after it is refused by the
// record itself.
func (d *Daemon) endOrphanedQueuedJobs(ctx context.Context, old, a events.ConfigAppliedData, seq int64) error {
	runs := map[string]bool{}
	for _, p := range a.Plugins {
		runs[p.Name] = p.Enabled
	}
	skipped := map[string]string{}
	for _, s := range a.Skipped {
		skipped[s.Name] = s.Reason
	}
	for _, p := range old.Plugins {
		enabled, loaded := runs[p.Name]
		if !p.Enabled || (loaded && enabled) {
			continue
		}
		reason := fmt.Sprintf("plugin %q was removed from the config by the reload at seq %d", p.Name, seq)
		switch {
		case loaded:
			reason = fmt.Sprintf("plugin %q is disabled in the config (plugins.%s.enabled: false) since the reload at seq %d", p.Name, p.Name, seq)
		case skipped[p.Name] != "":
			reason = fmt.Sprintf("plugin %q was not loaded by the reload at seq %d: %s", p.Name, seq, skipped[p.Name])
		}
		if err := d.cancelQueued(ctx, p.Name, reason, seq); err != nil {
			return err
		}
	}
	return nil
}

// cancelQueued cancels every queued job of plugin with reason, once the
// projections have reached seq, a page at a time.
func (d *Daemon) cancelQueued(ctx context.Context, plugin, reason string, seq int64) error {
	const page = 1000
	for {
		if err := d.Projector.WaitFor(ctx, seq); err != nil {
			return err
		}
		queued, err := views.ListJobs(ctx, d.Ledger, views.JobFilter{Status: events.StatusQueued, Plugin: plugin, Limit: page})
		if err != nil {
			return err
		}
		for _, j := range queued {
			_, err := commands.CancelJob(ctx, d.Ledger, commands.Cancel{JobID: j.ID, Reason: reason, Actor: events.ActorDaemon, Now: time.Now(),
				Pipelines: d.Engine().PipelineRuntime()})
			if err != nil && !errors.Is(err, commands.ErrInvalidTransition) {
				return err
			}
			d.log.Warn("queued job ended: its plugin no longer runs", "job_id", j.ID, "plugin", plugin, "reason", reason)
		}
		if len(queued) < page {
			return nil
		}
		if seq, err = d.Ledger.LastSeq(ctx); err != nil {
			return err
		}
	}
}
