package views

import (
	"cmp"
	"slices"
	"time"
)

// RemotePlugin is a plugin the config places runs_on: remote or any, with
// the registered workers that serve it (config check, system status).
type RemotePlugin struct {
	Plugin string `json:"plugin"`
	RunsOn string `json:"runs_on"` // remote | any
	// Installed: the plugin is loaded on the daemon's machine too (for
	// runs_on: any, the daemon runs its jobs when no worker does).
	Installed bool           `json:"installed_here"`
	Workers   []RemoteServer `json:"workers"`
}

// Served reports whether a registered worker serves the plugin, or, for
// runs_on: any, the daemon's machine has it: whether its jobs can run.
func (p RemotePlugin) Served() bool {
	return len(p.Workers) > 0 || (p.RunsOn != "remote" && p.Installed)
}

// RemoteServer is a registered worker that serves a remote plugin.
type RemoteServer struct {
	Name     string `json:"name"`
	Host     string `json:"host"`
	LastSeen string `json:"last_seen" doc:"As worker list's last_seen"`
	// Claims is how many running jobs of the plugin it holds leases on,
	// LiveClaims how many of those leases run until after now (the others
	// ran out: the sweeper ends them).
	Claims     int `json:"claims"`
	LiveClaims int `json:"live_claims"`
	// Live: it holds a lease, on a job of any plugin, that runs until
	// after now (it renewed in time). A worker waiting for work records
	// nothing, so an idle worker is not known to be live: its last seen is
	// its registration.
	Live bool `json:"live"`
}

// RemotePlugins are the plugins placed (name → runs_on, remote or any;
// others are left out), by name, each with the workers of fleet (ReadFleet)
// that registered it; installed names those loaded on the daemon's machine.
func RemotePlugins(fleet []FleetWorker, placed map[string]string, installed func(string) bool, now time.Time) []RemotePlugin {
	out := []RemotePlugin{}
	for name, runsOn := range placed {
		if runsOn != "remote" && runsOn != "any" {
			continue
		}
		p := RemotePlugin{Plugin: name, RunsOn: runsOn, Installed: installed != nil && installed(name), Workers: []RemoteServer{}}
		for _, w := range fleet {
			if !slices.Contains(w.Plugins, name) {
				continue
			}
			s := RemoteServer{Name: w.Name, Host: w.Host, LastSeen: w.LastSeen}
			for _, l := range w.Leases {
				live := leaseLive(l, now)
				s.Live = s.Live || live
				if l.Plugin != name {
					continue
				}
				s.Claims++
				if live {
					s.LiveClaims++
				}
			}
			p.Workers = append(p.Workers, s)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b RemotePlugin) int { return cmp.Compare(a.Plugin, b.Plugin) })
	return out
}

// leaseLive reports whether l runs until after now.
func leaseLive(l FleetLease, now time.Time) bool {
	until, err := time.Parse(time.RFC3339Nano, l.LeaseUntil)
	return err == nil && until.After(now)
}
