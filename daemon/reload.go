package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/views"
)

// LoadConfig loads the config at path, or the built-in defaults when path
// is "": what a daemon started with that path runs with, and reloads.
func LoadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

// Reload reads the daemon's config file again and discovers its plugins
// (spec §11.3). If the config is valid, it becomes what the daemon decides
// with at once: the dispatcher's plugins, settings, routes and pool, the
// scheduler's schedules; jobs already started finish with the settings they
// started with. It records config.applied (reason reload, with the changes)
// and ends the queued jobs of plugins the new config removed or disabled,
// canceled with the reason. An invalid config changes nothing: Reload
// records config.reload_failed and returns why. Reloads run one at a time.
func (d *Daemon) Reload(ctx context.Context) (events.ConfigAppliedData, error) {
	d.reloading.Lock()
	defer d.reloading.Unlock()
	through, err := d.Ledger.LastSeq(ctx)
	if err != nil {
		return events.ConfigAppliedData{}, err
	}
	cfg, reg, set, skippedPipelines, err := d.loadForReload()
	if err != nil {
		d.log.Error("config reload failed: keeping the config in use", "err", err.Error())
		_, rerr := d.Ledger.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion,
			Type: events.ConfigReloadFailed, Data: events.ReloadFailedData{PID: os.Getpid(), Through: through, Error: err.Error()},
			Meta: ledger.Meta{Actor: "daemon"}})
		return events.ConfigAppliedData{}, errors.Join(err, rerr)
	}
	old := d.current.Load().applied
	a := Applied(reg, cfg, "reload")
	a.Pipelines, a.SkippedPipelines = appliedPipelines(set), skippedPipelines
	a.Through, a.StartedAt = through, old.StartedAt
	a.Changes = a.Settings.Diff(old.Settings)
	// A plugin new to the daemon, or whose config changed, runs init before
	// any job of it runs with the new settings (InitPlugins skips the
	// others; each is bounded by its timeouts.init); a failure marks it
	// unhealthy. Then the record, and only once it is in the ledger does
	// the daemon run with the new config: the ledger never says one config
	// while the daemon runs another.
	if _, err := InitPlugins(ctx, InitOptions{Ledger: d.Ledger, Plugins: reg, Config: cfg, Logger: d.log, Grace: d.dispatch.Grace}); err != nil {
		return events.ConfigAppliedData{}, fmt.Errorf("config not reloaded: recording plugin inits failed: %w", err)
	}
	seq, err := recordApplied(ctx, d.Ledger, a)
	if err != nil {
		return events.ConfigAppliedData{}, fmt.Errorf("config not reloaded: %w", err)
	}
	if d.Dispatcher != nil {
		d.Dispatcher.ApplyPipelines(cfg, reg, set)
	}
	d.current.Store(newCurrent(cfg, reg, set, a))
	d.applySchedules(time.Now())
	d.log.Info("config reloaded", "changes", len(a.Changes), "plugins", len(a.Plugins), "skipped", len(a.Skipped), "seq", seq)
	if err := d.endOrphanedQueuedJobs(ctx, old, a, seq); err != nil {
		return a, fmt.Errorf("config reloaded, but ending the queued jobs of removed plugins failed: %w", err)
	}
	return a, nil
}

// loadForReload loads the config file again, discovers plugins for it and
// compiles its pipelines.
func (d *Daemon) loadForReload() (*config.Config, *pluginhost.Registry, *pipeline.Set, []events.SkippedPipeline, error) {
	cfg, err := LoadConfig(d.Config().Source)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for _, fe := range cfg.IntegrityWarnings {
		d.log.Warn("config file integrity warning", "file", fe.File, "detail", fe.Msg)
	}
	if cfg.StateDir != "" && cfg.StateDir != d.Config().StateDir {
		d.log.Warn("state_dir changed in the config: a reload cannot move the ledger; restart the daemon to use it",
			"state_dir", cfg.StateDir, "in_use", d.StateDir)
	}
	reg, err := LoadPlugins(d.StateDir, cfg, d.log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for name, step := range d.steps {
		if p, ok := reg.Get(name); ok {
			p.Step = step
		}
	}
	set, skipped, err := CompilePipelines(cfg, reg, d.log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cfg, reg, set, skipped, nil
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
			_, err := commands.CancelJob(ctx, d.Ledger, commands.Cancel{JobID: j.ID, Reason: reason, Actor: "daemon", Now: time.Now(),
				Pipelines: d.pipelineRuntime()})
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
