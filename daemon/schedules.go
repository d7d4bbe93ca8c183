package daemon

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
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

// startScheduler starts the scheduler on the schedules of the config.
func (d *Daemon) startScheduler(ctx context.Context, log *slog.Logger) {
	start := time.Now()
	cfg := d.Config
	d.Scheduler = scheduler.New(scheduler.Options{
		Ledger: d.Ledger, Logger: log, Start: start,
		Job: func(plugin, command string) commands.Enqueue {
			return commands.JobFor(cfg, plugin, command, commands.BySchedule)
		},
	})
	d.Scheduler.Apply(Schedules(cfg, func(name string) bool {
		_, ok := d.Plugins.Get(name)
		return ok
	}, start))
	d.Scheduler.Start(ctx)
}
