package views

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// PluginRecord is what the ledger holds of one plugin (spec §11.6
// status): its state as the plugin_state compatibility view mirrors it,
// its health, how many of its jobs ended each way, and its newest jobs.
type PluginRecord struct {
	Name string `json:"name"`
	// State is its state ({} when it has none); StateUpdatedAt and
	// StateUpdatedSeq say when it last changed.
	State           json.RawMessage `json:"state"`
	StateUpdatedAt  *string         `json:"state_updated_at,omitempty"`
	StateUpdatedSeq int64           `json:"state_updated_seq,omitempty"`
	Health          PluginHealth    `json:"health"`
	// Totals count its jobs that ended, by status (succeeded, dead,
	// canceled), over the ledger's life.
	Totals map[events.Status]int64 `json:"totals"`
	// Jobs are its newest jobs, newest first: its last runs, and any it
	// has queued.
	Jobs []Job `json:"jobs"`
}

// Known reports whether the ledger holds anything of the plugin.
func (r PluginRecord) Known() bool {
	return len(r.Jobs) > 0 || r.StateUpdatedSeq > 0 || r.Health.Status != HealthUnknown || len(r.Totals) > 0
}

// ReadPlugin reads plugin's record with its newest limit jobs, in one read
// transaction, through indexes: its cost follows the jobs shown, never the
// history.
func ReadPlugin(ctx context.Context, l *ledger.Ledger, plugin string, limit int) (r PluginRecord, err error) {
	r = PluginRecord{Name: plugin, State: json.RawMessage("{}"), Totals: map[events.Status]int64{}, Jobs: []Job{}}
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		err := queries.GetPluginState(conn, plugin, func(row queries.GetPluginStateRow) error {
			r.State, r.StateUpdatedAt, r.StateUpdatedSeq = json.RawMessage(row.State), row.UpdatedAt, row.UpdatedSeq
			return nil
		})
		if err != nil {
			return err
		}
		health, err := readPluginHealth(conn)
		if err != nil {
			return err
		}
		r.Health = health.Of(plugin)
		err = queries.ListJobTotals(conn, func(row queries.ListJobTotalsRow) error {
			if row.Plugin == plugin {
				r.Totals[events.Status(row.Status)] = row.N
			}
			return nil
		})
		if err != nil {
			return err
		}
		return pluginJobs(conn, plugin, math.MaxInt64, limit, func(j Job) (bool, error) {
			r.Jobs = append(r.Jobs, j)
			return true, nil
		})
	})
	if err != nil {
		return PluginRecord{}, fmt.Errorf("read plugin %s: %w", plugin, err)
	}
	return r, nil
}

// PluginView is one plugin as plugin show and GET /plugin/{name} show it:
// as it is loaded, and what the ledger holds of it.
type PluginView struct {
	// Plugin is the plugin as it is loaded: by the running daemon (its
	// config.applied), or, with none, as found now; nil when it is not.
	Plugin *events.AppliedPlugin `json:"plugin"`
	// Skipped says why it was found but not loaded.
	Skipped string `json:"skipped,omitempty"`
	PluginRecord
}

// ShowPlugin reads plugin name's view, with its newest limit jobs, against
// the plugins applied names (loaded or skipped). A name neither loaded,
// skipped nor known to the ledger is a *commands.TargetError
// (commands.ErrPluginUnknown, with the nearest name); a plugin no longer
// loaded whose jobs the ledger holds is shown, with Plugin nil.
func ShowPlugin(ctx context.Context, l *ledger.Ledger, applied events.ConfigAppliedData, name string, limit int) (PluginView, error) {
	v := PluginView{}
	for i, p := range applied.Plugins {
		if p.Name == name {
			v.Plugin = &applied.Plugins[i]
		}
	}
	for _, s := range applied.Skipped {
		if s.Name == name {
			v.Skipped = s.Reason
		}
	}
	var err error
	if v.PluginRecord, err = ReadPlugin(ctx, l, name, limit); err != nil {
		return PluginView{}, err
	}
	if v.Plugin == nil && v.Skipped == "" && !v.Known() {
		_, err := commands.TargetPlugin(applied, name)
		return PluginView{}, err
	}
	return v, nil
}

// LastRuns returns, for each of plugins that has one, its newest job that
// has started (a run; its status says how it went or goes). Each is found
// through job_queue_by_plugin from the newest end, past the jobs queued
// that have not started: its cost is at most the size of the queue.
func LastRuns(ctx context.Context, l *ledger.Ledger, plugins []string) (map[string]Job, error) {
	runs := map[string]Job{}
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		for _, p := range plugins {
			err := pluginJobs(conn, p, math.MaxInt64, math.MaxInt, func(j Job) (bool, error) {
				if j.StartedAt == nil {
					return true, nil // queued, never started: go on
				}
				runs[p] = j
				return false, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("last runs: %w", err)
	}
	return runs, nil
}

// pluginJobPage is how many of a plugin's jobs one read of pluginJobs asks
// for, when it is to go on until fn stops it.
const pluginJobPage = 32

// pluginJobs calls fn with plugin's jobs before seq before, newest first,
// at most limit of them, until fn returns false.
func pluginJobs(conn *sqlite.Conn, plugin string, before int64, limit int, fn func(Job) (bool, error)) error {
	for limit > 0 {
		page := min(limit, pluginJobPage)
		n, more := 0, true
		err := queries.ListPluginJobs(conn, queries.ListPluginJobsParams{Plugin: plugin, BeforeSeq: before, MaxJobs: int64(page)},
			func(row queries.ListPluginJobsRow) error {
				if !more {
					return nil
				}
				n++
				j := jobOf(queries.GetJobRow(row))
				before = j.Seq
				var err error
				more, err = fn(j)
				return err
			})
		if err != nil || !more || n < page {
			return err
		}
		limit -= n
	}
	return nil
}
