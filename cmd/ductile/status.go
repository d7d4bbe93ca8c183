package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/schedule"
	"github.com/ductile/ductile/views"
)

func systemStatusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the daemon, its applied config, each plugin's health, breakers and next run, the queue and the ledger",
		Description: "Runs each plugin's health command now (at most 4 at once, each bounded by its\n" +
			"timeouts.health) and records the results, as plugin health does; --no-health shows\n" +
			"the last recorded results instead and writes nothing. Health runs with the plugin\n" +
			"config in the config file (the ledger holds only its hash): a warning names each\n" +
			"plugin whose config differs from the daemon's. The plugins, settings and\n" +
			"schedules are those the running daemon applied (config.applied); with no daemon\n" +
			"running, those of the config file, and nothing fires.",
		Flags: []cli.Flag{jsonFlag(),
			&cli.BoolFlag{Name: "no-health", Usage: "do not run health commands: show the last recorded health"}},
		Action: systemStatus,
	}
}

// statusOutput is what system status prints with --json.
type statusOutput struct {
	Daemon  daemonStatus      `json:"daemon"`
	Plugins []pluginStatus    `json:"plugins"`
	Queue   views.QueueCounts `json:"queue"`
	// Workers is how busy the running daemon's worker pool is; absent when
	// no daemon runs.
	Workers *views.Workers `json:"workers,omitempty"`
	// Remote are the registered remote workers and the leases they hold
	// (views.ReadFleet), with or without a daemon.
	Remote []views.FleetWorker `json:"remote_workers"`
	// RemotePlugins are the enabled plugins the config places runs_on:
	// remote or any, each with the registered workers that serve it.
	RemotePlugins []views.RemotePlugin `json:"remote_plugins"`
	Ledger        views.LedgerSize     `json:"ledger"`
	// Warnings say what the figures above may not reflect.
	Warnings []string `json:"warnings"`
}

type daemonStatus struct {
	Running   bool   `json:"running"`
	PID       int    `json:"pid,omitempty"`
	Since     string `json:"up_since,omitempty"`
	Config    string `json:"config"`
	Hash      string `json:"config_hash,omitempty"`
	AppliedAt string `json:"applied_at,omitempty"`
	Reason    string `json:"applied_reason,omitempty"`
	// API and Writes are what the running daemon reports of itself
	// (daemon.Report): whether its HTTP API serves, and whether its writes
	// to the ledger fail.
	API    *views.APIState     `json:"api,omitempty"`
	Writes *ledger.WriteHealth `json:"writes,omitempty"`
}

type pluginStatus struct {
	Name     string             `json:"name"`
	Version  string             `json:"version"`
	Enabled  bool               `json:"enabled"`
	Health   views.PluginHealth `json:"health"`
	Breakers []views.Breaker    `json:"breakers"`
	// NextRun is the plugin's earliest next scheduled firing; nil when it
	// has none.
	NextRun *nextRun `json:"next_run"`
	// LastRun is its newest job that has started (views.LastRuns); nil
	// when none has.
	LastRun *views.Job `json:"last_run"`
}

type nextRun struct {
	Schedule string    `json:"schedule"`
	Due      time.Time `json:"due"`
}

// daemonSide is what the running daemon applied, or, with none running,
// what this process finds: the plugins, the config (its settings) and the
// service start schedules count from.
type daemonSide struct {
	status   daemonStatus
	plugins  []events.AppliedPlugin
	config   *config.Config
	settings events.Settings // as applied (zero with no daemon)
	started  time.Time
}

// appliedSettings are the settings the running daemon applied.
func (s daemonSide) appliedSettings() (events.Settings, error) {
	if s.settings.Hash == "" {
		return events.Settings{}, fmt.Errorf("no applied settings")
	}
	return s.settings, nil
}

// readDaemonSide reads the running daemon's config.applied, or discovers
// the plugins with this process's config when no daemon runs.
func readDaemonSide(ctx context.Context, e *env, l *ledger.Ledger) (daemonSide, error) {
	h, err := daemon.Holder(e.stateDir)
	if err != nil {
		return daemonSide{}, err
	}
	if h.Daemon() {
		a, ok, err := daemon.LastApplied(ctx, l)
		if err != nil {
			return daemonSide{}, err
		}
		if ok && a.PID == h.PID && a.Settings.Hash != "" {
			cfg, err := appliedConfig(a.ConfigAppliedData)
			if err != nil {
				return daemonSide{}, err
			}
			started, _ := time.Parse(time.RFC3339Nano, a.StartedAt)
			side := daemonSide{
				status: daemonStatus{Running: true, PID: a.PID, Since: a.StartedAt, Config: orDefaults(a.Settings.Source), Hash: a.Settings.Hash,
					AppliedAt: a.At.UTC().Format(time.RFC3339Nano), Reason: a.Reason},
				plugins: a.Plugins, config: cfg, settings: a.Settings, started: started,
			}
			report, ok, err := daemon.ReadReport(e.stateDir, h.PID)
			if err != nil {
				return daemonSide{}, err
			}
			if ok {
				side.status.API, side.status.Writes = &report.API, &report.Writes
			}
			return side, nil
		}
	}
	reg, _, err := daemon.DiscoverPlugins(e.stateDir, e.cfg, e.quietLogger())
	if err != nil {
		return daemonSide{}, err
	}
	side := daemonSide{status: daemonStatus{Running: h.Daemon(), PID: h.PID, Config: orDefaults(e.cfg.Source)},
		plugins: daemon.Applied(reg, e.cfg, "").Plugins, config: e.cfg, started: time.Now()}
	return side, nil
}

// schedules are the schedules the daemon side runs: of its enabled plugins.
func (s daemonSide) schedules() []schedule.Schedule {
	runs := map[string]bool{}
	for _, p := range s.plugins {
		runs[p.Name] = p.Enabled
	}
	return daemon.Schedules(s.config, func(name string) bool { return runs[name] }, s.started)
}

func systemStatus(c *cli.Context) error {
	e, cfgErr := loadEnv(c)
	if cfgErr != nil {
		var err error
		if e, err = daemonEnv(c); err != nil {
			return err
		}
	}
	ctx := c.Context
	l, err := e.readLedger(ctx) // first: on a missing ledger nothing is created
	if err != nil {
		return err
	}
	defer l.Close()
	side, err := readDaemonSide(ctx, e, l)
	if err != nil {
		return err
	}
	var warnings []string
	switch {
	case c.Bool("no-health"):
	case side.status.Writes != nil && side.status.Writes.Failing:
		warnings = append(warnings, "health not checked: the daemon's writes to the ledger fail, so no result could be recorded; the last recorded health is shown")
	case cfgErr != nil:
		warnings = append(warnings, "health not checked: the config file is invalid ("+cfgErr.Error()+"); the last recorded health is shown")
	default:
		// The ledger holds plugin config by hash only: health runs with the
		// file's, which may not be the daemon's.
		warnings = append(warnings, configDrift(e.cfg, side)...)
		if err := runHealthChecks(ctx, e); err != nil {
			return err
		}
	}
	st, err := views.ReadStatus(ctx, l)
	if err != nil {
		return err
	}
	breakers, err := views.ReadBreakers(ctx, l, "", 0)
	if err != nil {
		return err
	}
	scheds, err := views.ReadSchedules(ctx, l, side.schedules(), time.Now())
	if err != nil {
		return err
	}
	out := statusOutput{Daemon: side.status, Plugins: []pluginStatus{}, Queue: st.Queue, Ledger: st.Ledger, Warnings: orEmpty(warnings)}
	if out.Remote, err = views.ReadFleet(ctx, l); err != nil {
		return err
	}
	installed := map[string]bool{}
	for _, p := range side.plugins {
		installed[p.Name] = true
	}
	remote, unserved := daemon.CheckRemote(side.config, func(name string) bool { return installed[name] }, out.Remote, time.Now())
	out.RemotePlugins, out.Warnings = remote, append(out.Warnings, unserved...)
	if side.status.Running {
		w, err := views.ReadWorkers(ctx, l, side.config.Service.MaxWorkers, time.Now())
		if err != nil {
			return err
		}
		out.Workers = &w
	}
	names := make([]string, len(side.plugins))
	for i, p := range side.plugins {
		names[i] = p.Name
	}
	lastRuns, err := views.LastRuns(ctx, l, names)
	if err != nil {
		return err
	}
	for _, p := range side.plugins {
		ps := pluginStatus{Name: p.Name, Version: p.Version, Enabled: p.Enabled, Health: st.Health.Of(p.Name), Breakers: []views.Breaker{}}
		for _, b := range breakers {
			if b.Plugin == p.Name {
				ps.Breakers = append(ps.Breakers, b)
			}
		}
		for _, s := range scheds {
			if s.Plugin == p.Name && s.Next != nil && (ps.NextRun == nil || s.Next.Due.Before(ps.NextRun.Due)) {
				ps.NextRun = &nextRun{Schedule: s.Plugin + "/" + s.ID, Due: s.Next.Due}
			}
		}
		if run, ok := lastRuns[p.Name]; ok {
			ps.LastRun = &run
		}
		out.Plugins = append(out.Plugins, ps)
	}
	slices.SortFunc(out.Plugins, func(a, b pluginStatus) int { return strings.Compare(a.Name, b.Name) })
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	printStatus(e, out)
	return nil
}

// configDrift names the plugins whose config: in this process's config
// differs (by hash) from what the running daemon applied: their health is
// checked with the file's.
func configDrift(cfg *config.Config, side daemonSide) []string {
	if !side.status.Running || side.status.Hash == "" {
		return nil
	}
	mine := cfg.Settings()
	var out []string
	applied, err := side.appliedSettings()
	if err != nil {
		return nil
	}
	for name, ps := range applied.Plugins {
		// One that needs a ${VAR} this shell lacks is not checked here
		// (daemon.HealthUnset), and its hash is not the real one.
		if m, ok := mine.Plugins[name]; ok && m.ConfigHash != ps.ConfigHash && len(cfg.UnsetBehind("plugins."+name+".config_hash")) == 0 {
			out = append(out, fmt.Sprintf("plugin %s: its config: in %s differs from the daemon's; health was checked with the file's (apply it with: ductile system reload)", name, orDefaults(cfg.Source)))
		}
	}
	slices.Sort(out)
	return out
}

// runHealthChecks runs every plugin's health command and records the
// results (daemon.CheckHealth), with the plugins and config this process
// loads.
func runHealthChecks(ctx context.Context, e *env) error {
	reg, err := daemon.LoadPlugins(e.stateDir, e.cfg, e.quietLogger())
	if err != nil {
		return err
	}
	l, err := e.openExistingLedger(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	if _, err := daemon.CheckHealth(ctx, daemon.HealthOptions{Ledger: l, Plugins: reg, Config: e.cfg, Logger: e.quietLogger(), Actor: events.ActorCLI}); err != nil {
		return err
	}
	return daemon.CatchUpUnlessHeld(ctx, e.stateDir, l, e.quietLogger())
}

func printStatus(e *env, out statusOutput) {
	w := e.stdout
	d := out.Daemon
	switch {
	case d.Running && d.Since != "":
		since, _ := time.Parse(time.RFC3339Nano, d.Since)
		fmt.Fprintf(w, "daemon    running (pid %d) since %s (up %s)\n", d.PID, since.Local().Format("2006-01-02 15:04:05 MST"), time.Since(since).Round(time.Second))
		fmt.Fprintf(w, "config    %s (%s, applied %s at %s)\n", d.Config, shortHash(d.Hash), d.Reason, d.AppliedAt)
	case d.Running:
		fmt.Fprintf(w, "daemon    running (pid %d), but it recorded no settings: restart it with this version\n", d.PID)
	default:
		fmt.Fprintf(w, "daemon    not running: nothing is dispatched or scheduled (start it with: ductile system start)\n")
		fmt.Fprintf(w, "config    %s (this command's; a daemon would apply it at start)\n", d.Config)
	}
	if d.Writes != nil && d.Writes.Failing {
		fmt.Fprintf(w, "writes    FAILING since %s (%d failed): %s; nothing can be recorded (free disk space, or end what locks the ledger)\n",
			d.Writes.Since.Local().Format("2006-01-02 15:04:05 MST"), d.Writes.Failures, d.Writes.LastError)
	}
	switch api := d.API; {
	case api == nil:
	case api.Down():
		fmt.Fprintf(w, "api       OFF: %s\n", api.Off)
	case api.Enabled:
		fmt.Fprintf(w, "api       listening on %s\n", api.Listening)
	default:
		fmt.Fprintf(w, "api       off (api.enabled: false)\n")
	}
	q := out.Queue
	fmt.Fprintf(w, "queue     %d queued, %d running, %d cancel requested\n", q.Queued, q.Running, q.CancelRequested)
	if ws := out.Workers; ws != nil {
		fmt.Fprintf(w, "workers   %d of %d busy", ws.Busy, ws.Max)
		if ws.Saturated {
			jobs := fmt.Sprintf("%d jobs of other plugins wait", ws.Waiting)
			if ws.Waiting == 1 {
				jobs = "a job of another plugin waits"
			}
			fmt.Fprintf(w, ": every worker is busy while %s for one (a hung plugin holds its worker until its timeout; see: ductile queue; raise service.max_workers)", jobs)
		}
		fmt.Fprintln(w)
	}
	for _, r := range out.Remote {
		fmt.Fprintf(w, "remote    %s on %s (%s): %d running, plugins %s, last seen %s\n", r.Name, dashIfEmpty(r.Host), dashIfEmpty(r.Version),
			r.Claims, dashIfEmpty(strings.Join(r.Plugins, ",")), dashIfEmpty(r.LastSeen))
	}
	printRemotePlugins(w, out.RemotePlugins)
	lg := out.Ledger
	fmt.Fprintf(w, "ledger    %s (WAL %s, archives %s); head seq %d, projector lag %d\n",
		humanBytes(lg.FileBytes), humanBytes(lg.WALBytes), humanBytes(lg.ArchiveBytes), lg.Head, lg.Lag)
	for _, warning := range out.Warnings {
		fmt.Fprintf(w, "warning   %s\n", warning)
	}
	if len(out.Plugins) == 0 {
		fmt.Fprintln(w, "no plugins")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nPLUGIN\tVERSION\tHEALTH\tBREAKERS\tNEXT RUN\tLAST RUN")
	for _, p := range out.Plugins {
		health := p.Health.Summary
		if !p.Enabled {
			health = "disabled"
		}
		breakers := "closed"
		var open []string
		for _, b := range p.Breakers {
			if b.State != "closed" || b.Failures > 0 {
				open = append(open, b.Command+": "+b.Summary())
			}
		}
		if len(open) > 0 {
			breakers = strings.Join(open, "; ")
		}
		next := "-"
		if p.NextRun != nil {
			next = p.NextRun.Due.Local().Format("2006-01-02 15:04:05 MST") + " (" + p.NextRun.Schedule + ")"
		}
		last := "-"
		if r := p.LastRun; r != nil {
			at := r.StartedAt
			if r.CompletedAt != nil {
				at = r.CompletedAt
			}
			last = fmt.Sprintf("%s %s (%s)", r.Status, shortTime(*at), r.Command)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Version, health, breakers, next, last)
	}
	tw.Flush()
}

// shortTime is a recorded time (RFC 3339, UTC) to the second, in local
// time as the other times of the table.
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}

func shortHash(h string) string {
	if len(h) > len("blake3:")+12 {
		return h[:len("blake3:")+12] + "…"
	}
	return h
}
