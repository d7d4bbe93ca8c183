// Package workerhost is the loop of `ductile worker`: a worker host that
// registers its plugins with a daemon over HTTP, claims their jobs with a
// long-poll, runs each with pluginhost exactly as the daemon's dispatcher
// does, and reports its stderr, control lines, lease renewals and outcome
// back (docs/remote-workers.md, "Running a worker").
package workerhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ductile/ductile/apiclient"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// Defaults of Options.
const (
	// DefaultClaimWait is how long one claim waits for a job before it asks
	// again (the daemon bounds it by engine.MaxClaimWait).
	DefaultClaimWait = 30 * time.Second
	// DefaultShutdownGrace is how long running jobs may go on once the host
	// is told to stop, before their plugins are killed.
	DefaultShutdownGrace = 30 * time.Second
	// claimSlack is how much longer than its wait a claim may take before
	// the host deems the daemon hung and asks again.
	claimSlack = 15 * time.Second
)

// Options configure a Host.
type Options struct {
	// Client calls the daemon as this worker.
	Client *Client
	// Plugins are the plugins the host serves (discovered and trusted as
	// the daemon does: pluginhost.Discover).
	Plugins []*pluginhost.Plugin
	// Host and Version are what the registration says of the machine and
	// of the binary.
	Host, Version string
	// Concurrency is how many jobs run at once (default 1).
	Concurrency int
	// Once handles one job and returns.
	Once bool
	// ClaimWait is how long one claim waits (default DefaultClaimWait).
	ClaimWait time.Duration
	// ShutdownGrace is how long running jobs go on after the host is told
	// to stop (default DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// KillGrace is the wait between SIGTERM and SIGKILL of a plugin's
	// process group (default pluginhost.DefaultGrace).
	KillGrace time.Duration
	// Log receives what the host does; nil discards it.
	Log *slog.Logger
}

// ErrNoJob is Run's answer in Once mode when it stopped before a job was
// completed.
var ErrNoJob = errors.New("no job was completed")

// errShutdown is the cause of a plugin killed because the host stopped.
var errShutdown = errors.New("the worker host stopped before the plugin finished (its job is retried)")

// errCanceled is the cause of a plugin killed because its job's cancel was
// requested.
var errCanceled = errors.New("canceled: a cancel was requested")

// errLeaseLost is the cause of a plugin killed because its lease no longer
// holds the job (the daemon gave it to another worker).
var errLeaseLost = errors.New("the lease was lost: the daemon refused its renewal as stale")

// Host runs the worker loop.
type Host struct {
	o       Options
	log     *slog.Logger
	byName  map[string]*pluginhost.Plugin
	names   []string
	lease   time.Duration
	metrics Metrics
}

// Metrics count what a Host did.
type Metrics struct {
	mu sync.Mutex
	// Completed counts completions the daemon accepted; Dropped those it
	// refused (stale fence) or that could not be delivered.
	Completed, Dropped int
	// ClaimToStart are the delays from each claim's answer to its plugin's
	// start.
	ClaimToStart []time.Duration
}

// New makes a Host of o.
func New(o Options) (*Host, error) {
	if o.Client == nil {
		return nil, errors.New("workerhost: no client")
	}
	if len(o.Plugins) == 0 {
		return nil, errors.New("no plugin to serve: give --plugins DIR holding plugin directories (each with a manifest.yaml), or check --plugin names")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Once {
		o.Concurrency = 1
	}
	if o.ClaimWait <= 0 {
		o.ClaimWait = DefaultClaimWait
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h := &Host{o: o, log: o.Log.With("component", "worker", "worker", o.Client.Worker().Name), byName: map[string]*pluginhost.Plugin{}}
	o.Client.link = &link{log: h.log, api: o.Client.base}
	for _, p := range o.Plugins {
		h.byName[p.Name] = p
		h.names = append(h.names, p.Name)
	}
	return h, nil
}

// Snapshot is a copy of what the host did so far.
func (h *Host) Snapshot() (completed, dropped int, claimToStart []time.Duration) {
	h.metrics.mu.Lock()
	defer h.metrics.mu.Unlock()
	return h.metrics.Completed, h.metrics.Dropped, append([]time.Duration(nil), h.metrics.ClaimToStart...)
}

// Run registers the host and runs jobs until ctx ends (or, with Once, one
// job is done). When ctx ends it claims no more; running jobs go on for
// ShutdownGrace, then their plugins are killed and their attempts
// reported interrupted (retried). It returns once every job has been
// reported; with Once, ErrNoJob unless one job was completed.
func (h *Host) Run(ctx context.Context) error {
	if err := h.register(ctx); err != nil {
		return err
	}
	// Jobs outlive ctx by the grace: they run under their own context,
	// canceled when the grace ends.
	jobs, killJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer killJobs(nil)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		h.log.Info("stopping: no more claims; running jobs may finish", "grace", h.o.ShutdownGrace)
		t := time.NewTimer(h.o.ShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			h.log.Warn("grace over: killing the plugins still running; their jobs are reported interrupted and retried")
			killJobs(errShutdown)
		case <-done:
		}
	}()
	var wg sync.WaitGroup
	var completed sync.Once
	onceDone := make(chan struct{})
	for range h.o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.slot(ctx, jobs, func() { completed.Do(func() { close(onceDone) }) }, onceDone)
		}()
	}
	wg.Wait()
	close(done)
	if h.o.Once {
		select {
		case <-onceDone:
			return nil
		default:
			return ErrNoJob
		}
	}
	return nil
}

// register records the host's plugins with the daemon, trying again
// while the daemon cannot be reached.
func (h *Host) register(ctx context.Context) error {
	plugins := make([]events.WorkerPlugin, 0, len(h.o.Plugins))
	for _, p := range h.o.Plugins {
		plugins = append(plugins, engine.WorkerPluginOf(p))
	}
	var b backoff
	for {
		call, cancel := context.WithTimeout(ctx, callTimeout)
		reg, err := h.o.Client.Register(call, h.o.Host, h.o.Version, h.o.Concurrency, plugins)
		cancel()
		if err == nil {
			h.lease = reg.LeasePeriod()
			if h.lease <= 0 {
				h.lease = engine.DefaultLeasePeriod
			}
			h.log.Info("registered", "plugins", h.names, "lease_period", h.lease)
			return nil
		}
		var tlsErr *apiclient.TLSError
		if permanent(err) || errors.As(err, &tlsErr) {
			// Asking again changes nothing: the token, or the certificate
			// and --ca, must change first.
			return fmt.Errorf("register with the daemon: %w", err)
		}
		wait := b.after(err)
		h.log.Warn("cannot register with the daemon; trying again", "err", err, "retry_in", wait.Round(time.Millisecond),
			"hint", "is the daemon running and --api its address (ductile system status on its machine)?")
		if !sleep(ctx, wait) {
			return fmt.Errorf("register with the daemon: %w", err)
		}
	}
}

// slot claims and runs jobs one at a time until ctx ends (with Once, until
// a job completed: done is called, and every slot stops at onceDone).
func (h *Host) slot(ctx, jobs context.Context, done func(), onceDone <-chan struct{}) {
	var b backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-onceDone:
			return
		default:
		}
		// A long-poll cut by the daemon going away fails at once; one that
		// a hung daemon never answers is given up after the slack.
		call, cancel := context.WithTimeout(ctx, h.o.ClaimWait+claimSlack)
		claim, err := h.o.Client.Claim(call, h.names, h.o.ClaimWait)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if hasCode(err, CodeUnknownWorker) {
				// The daemon lost or does not accept the registration (a
				// reload changed runs_on): register again.
				if rerr := h.register(ctx); rerr != nil {
					h.log.Error("registering again failed", "err", rerr)
				}
			}
			wait := b.after(err)
			logRetry(h.log, "claim failed; trying again", err, wait, "hint", claimHint(err))
			if !sleep(ctx, wait) {
				return
			}
			continue
		}
		b.reset()
		if claim == nil {
			continue // none within the wait: ask again
		}
		if completed := h.runClaim(jobs, claim); h.o.Once {
			if completed {
				done()
			}
			return // one job handled, completed or not
		}
	}
}

// claimHint says what to do about a failed claim.
func claimHint(err error) string {
	switch {
	case hasCode(err, CodeUnknownWorker):
		return "set plugins.<name>.runs_on: remote (or any) in the daemon's config for the plugins this worker serves, then ductile system reload"
	case permanent(err):
		return "check the token (worker scope) and --api"
	}
	return "is the daemon running and reachable at --api?"
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
