package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/queries"
)

// claimScan is how many queued jobs of a worker's plugins one claim looks
// at, oldest first.
const claimScan = 256

// MaxClaimWait bounds how long one claim waits for a job: a longer wait
// asked for is cut to it (the worker asks again).
const MaxClaimWait = 60 * time.Second

// Claimed is a job a remote worker claimed: what it runs its plugin with
// (Request, the protocol v2 envelope) and the lease it holds it under.
type Claimed struct {
	JobID   string `json:"job_id"`
	Plugin  string `json:"plugin"`
	Command string `json:"command"`
	Attempt int    `json:"attempt"`
	// Fence is sent back with every renewal, log batch and completion.
	Fence      int64     `json:"fence"`
	LeaseUntil time.Time `json:"lease_until"`
	DeadlineAt time.Time `json:"deadline_at"`
	// Timeout is how long the plugin may run (DeadlineAt - the claim).
	Timeout time.Duration      `json:"timeout_ns"`
	TraceID string             `json:"trace_id,omitempty"`
	Request pluginhost.Request `json:"request"`
}

// Claim gives worker the oldest queued job, due now, of plugins (the
// plugins it registered whose config says runs_on: remote or any; nil: all
// of them), under a lease (job.started with Lease), within each plugin's
// parallelism cap counting every running job, local or remote. With no
// job for it, it waits up to wait for one, woken by the projector (never
// polling; at most MaxClaimWait), and returns nil, nil if none came. Two claims never get the
// same job: the start is appended with the job stream's expected version.
func (e *Engine) Claim(ctx context.Context, worker events.Worker, plugins []string, wait time.Duration) (*Claimed, error) {
	eligible, err := e.claimable(ctx, worker.Name, plugins)
	if err != nil {
		return nil, err
	}
	wait = min(wait, MaxClaimWait)
	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	for {
		var changed <-chan struct{}
		if p := e.fleet.watcher(); p != nil && wait > 0 {
			changed = p.Progressed() // taken before the read: no commit is missed
		}
		c, retryAt, err := e.claimOnce(ctx, worker, eligible)
		if c != nil || err != nil || changed == nil {
			return c, err
		}
		var due <-chan time.Time
		if !retryAt.IsZero() {
			t := time.NewTimer(max(0, retryAt.Sub(e.fleet.Now())))
			defer t.Stop() // at most one per wake-up of a bounded wait
			due = t.C
		}
		select {
		case <-changed:
		case <-due:
		case <-expired:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// claimable are the plugins worker may claim jobs of among those asked
// for (nil: every one it registered): registered by it, enabled, and
// placed remote or any.
func (e *Engine) claimable(ctx context.Context, worker string, asked []string) ([]string, error) {
	workers, err := e.fleet.Workers(ctx, e.ledger)
	if err != nil {
		return nil, err
	}
	w, ok := workers[worker]
	if !ok {
		return nil, fmt.Errorf("%w: %q has not registered (ductile worker registers when it starts)", ErrUnknownWorker, worker)
	}
	var out []string
	for _, p := range w.Plugins {
		if asked != nil && !slices.Contains(asked, p.Name) {
			continue
		}
		if pc := e.config.Plugin(p.Name); pc.Enabled && pc.RunsOn.Remote() {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: worker %q serves no plugin it may claim jobs of: set plugins.<name>.runs_on: remote (or any) in the daemon's config for the plugins it registered", ErrUnknownWorker, worker)
	}
	return out, nil
}

// claimOnce claims the oldest job it can among plugins' queued jobs, or
// returns the earliest retry time among those waiting for one.
func (e *Engine) claimOnce(ctx context.Context, worker events.Worker, plugins []string) (*Claimed, time.Time, error) {
	e.fleet.claimMu.Lock()
	defer e.fleet.claimMu.Unlock()
	names, _ := json.Marshal(plugins)
	unprojected := e.fleet.unprojected() // before the read: a claim may be counted twice, never missed
	var candidates []queries.ListClaimableJobsRow
	running := map[string]int{}
	err := e.ledger.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		err := queries.ListClaimableJobs(conn, queries.ListClaimableJobsParams{Plugins: string(names), MaxJobs: claimScan}, func(r queries.ListClaimableJobsRow) error {
			candidates = append(candidates, r)
			return nil
		})
		if err != nil {
			return err
		}
		return queries.ListRunningPlugins(conn, string(names), func(plugin string) error {
			running[plugin]++
			return nil
		})
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim a job: %w", err)
	}
	now := e.fleet.Now()
	var retryAt time.Time
	for _, c := range candidates {
		if c.NextRetryAt != nil {
			at, err := time.Parse(time.RFC3339Nano, *c.NextRetryAt)
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("claim a job: job %s: next_retry_at: %w", c.ID, err)
			}
			if at.After(now) {
				if retryAt.IsZero() || at.Before(retryAt) {
					retryAt = at
				}
				continue
			}
		}
		if unprojected[c.Plugin][c.ID] {
			continue // claimed already; the projection has not caught up
		}
		if capacity := e.remoteCapacity(c.Plugin); capacity > 0 && running[c.Plugin]+len(unprojected[c.Plugin]) >= capacity {
			continue
		}
		claimed, err := e.start(ctx, worker, c, now)
		switch {
		case err == nil:
			return claimed, time.Time{}, nil
		case errors.Is(err, commands.ErrInvalidTransition), errors.Is(err, commands.ErrNotDue):
			continue // started by someone else since the projection said queued
		default:
			return nil, time.Time{}, err
		}
	}
	return nil, retryAt, nil
}

// start records worker's claim of job c.
func (e *Engine) start(ctx context.Context, worker events.Worker, c queries.ListClaimableJobsRow, now time.Time) (*Claimed, error) {
	timeout := e.config.Timeout(c.Plugin, c.Command)
	st, err := commands.StartJob(ctx, e.ledger, commands.Start{JobID: c.ID, Timeout: timeout, Worker: &worker,
		LeasePeriod: e.fleet.leasePeriod, Now: now})
	if err != nil {
		return nil, fmt.Errorf("claim job %s: %w", c.ID, err)
	}
	leaseUntil, _ := time.Parse(time.RFC3339Nano, st.Lease.LeaseUntil) // as the command formatted it
	e.fleet.claimedAt(st.JobID, st.Plugin, st.Seq)
	e.fleet.leased(leaseUntil)
	config, err := e.PluginConfig(st.Plugin)
	if err != nil {
		return nil, fmt.Errorf("claim job %s: the plugin's config: %w", c.ID, err)
	}
	ctxJSON := st.Context
	if len(ctxJSON) == 0 || string(ctxJSON) == "null" {
		ctxJSON = json.RawMessage("{}")
	}
	return &Claimed{JobID: st.JobID, Plugin: st.Plugin, Command: st.Command, Attempt: st.Attempt, Fence: st.Lease.Fence,
		LeaseUntil: leaseUntil, DeadlineAt: st.DeadlineAt, Timeout: timeout, TraceID: st.TraceID,
		Request: pluginhost.Request{Protocol: pluginhost.ProtocolVersion, JobID: st.JobID, Command: st.Command,
			Config: config, State: st.State, Context: ctxJSON, Event: st.Event, DeadlineAt: st.DeadlineAt}}, nil
}
