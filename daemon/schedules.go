package daemon

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/schedule"
	"github.com/ductile/ductile/scheduler"
)

// Schedules returns the schedules the config gives the plugins that are
// enabled and loaded (loaded reports which), each counting from start.
func Schedules(cfg *config.Config, loaded func(plugin string) bool, start time.Time) []schedule.Schedule {
	names := make([]string, 0, len(cfg.Plugins))
	for name := range cfg.Plugins {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []schedule.Schedule
	for _, name := range names {
		pc := cfg.Plugins[name]
		if !pc.Enabled || !loaded(name) {
			continue
		}
		for _, e := range pc.Schedules {
			out = append(out, schedule.Schedule{Plugin: name, Entry: e, Start: start, MaxOutstandingPolls: pc.MaxOutstandingPolls})
		}
	}
	return out
}

// startScheduler starts the scheduler on the schedules of the config the
// daemon runs with. Its jobs take the retry settings of the config applied
// when they fire, and each firing passes the plugin command's circuit
// breaker (commands.AdmitScheduled) in the firing's own transaction.
func (d *Daemon) startScheduler(ctx context.Context, log *slog.Logger) {
	d.Scheduler = scheduler.New(scheduler.Options{
		Ledger: d.Ledger, Logger: log, Start: d.started,
		Job: func(plugin, command string) commands.Enqueue {
			return d.Engine().Defaults(plugin, command, events.ActorScheduler)
		},
		Admit: func(tx *ledger.Tx, plugin, command, jobID string, now time.Time) (bool, string, []ledger.NewEvent, error) {
			adm, evs, err := commands.AdmitScheduled(tx, plugin, command, d.Config().Plugin(plugin).CircuitBreaker, jobID, now)
			return adm.Allow, adm.Reason, evs, err
		},
	})
	d.applySchedules(d.started)
	d.Scheduler.Start(ctx)
}

// applySchedules gives the scheduler the schedules of the config the
// daemon runs with now (at start, and after a reload at at), each with its
// Since: kept when the entry is as it was applied before (d.schedules; at
// start, the previous daemon's), else at: a changed entry, or one applied
// again after a gap, has no missed firings to catch up.
func (d *Daemon) applySchedules(at time.Time) {
	reg := d.Plugins()
	now := Schedules(d.Config(), func(name string) bool {
		_, ok := reg.Get(name)
		return ok
	}, d.started)
	applied := make(map[string]schedule.Schedule, len(now))
	for i, sc := range now {
		now[i].Since = at
		if before, ok := d.schedules[sc.Stream()]; ok && reflect.DeepEqual(before.Entry, sc.Entry) {
			now[i].Since = before.Since
		}
		applied[sc.Stream()] = now[i]
	}
	d.schedules = applied
	d.scheduled.Store(&now)
	d.Scheduler.Apply(now)
}

// Scheduled returns the schedules the scheduler runs now, with their
// Since: none before it starts. Safe from any goroutine.
func (d *Daemon) Scheduled() []schedule.Schedule {
	if s := d.scheduled.Load(); s != nil {
		return slices.Clone(*s)
	}
	return nil
}

// previousSchedules are the schedules the daemon that applied a ran, with
// a zero Since: what this daemon's schedules count on from when unchanged.
func previousSchedules(a events.ConfigAppliedData, start time.Time) map[string]schedule.Schedule {
	out := map[string]schedule.Schedule{}
	if a.Settings.Hash == "" {
		return out
	}
	cfg, err := config.FromSettings(a.Settings)
	if err != nil {
		return out
	}
	loaded := map[string]bool{}
	for _, p := range a.Plugins {
		loaded[p.Name] = true
	}
	for _, sc := range Schedules(cfg, func(name string) bool { return loaded[name] }, start) {
		out[sc.Stream()] = sc
	}
	return out
}
