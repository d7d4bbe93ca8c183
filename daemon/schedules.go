package daemon

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
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
			return commands.JobFor(d.Config(), plugin, command, commands.BySchedule)
		},
		Admit: func(tx *ledger.Tx, plugin, command, jobID string, now time.Time) (bool, string, []ledger.NewEvent, error) {
			adm, evs, err := commands.AdmitScheduled(tx, plugin, command, d.Config().Plugin(plugin).CircuitBreaker, jobID, now)
			return adm.Allow, adm.Reason, evs, err
		},
	})
	d.applySchedules()
	d.Scheduler.Start(ctx)
}

// applySchedules gives the scheduler the schedules of the config the
// daemon runs with now (at start, and after a reload).
func (d *Daemon) applySchedules() {
	if d.Scheduler == nil {
		return
	}
	reg := d.Plugins()
	d.Scheduler.Apply(Schedules(d.Config(), func(name string) bool {
		_, ok := reg.Get(name)
		return ok
	}, d.started))
}
