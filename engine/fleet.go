package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// DefaultLeasePeriod is how long a remote worker's claim holds a job
// unless renewed: the worker renews every third of it.
const DefaultLeasePeriod = 30 * time.Second

// FleetOptions configure a Fleet.
type FleetOptions struct {
	// LeasePeriod is how long a claim or a renewal holds (default
	// DefaultLeasePeriod).
	LeasePeriod time.Duration
	// Now is the clock of claims, renewals and the sweeper (default
	// time.Now): tests move time with it.
	Now func() time.Time
}

// Fleet is what the Engines of one daemon share about its remote workers,
// across reloads: the lease period and clock, the claims made and not yet
// projected (so that two claims, or a claim and the dispatcher, count each
// other toward a plugin's cap), the workers' registrations as last
// recorded, and the wake-ups of the sweeper and of claims waiting for work.
type Fleet struct {
	leasePeriod time.Duration
	now         func() time.Time
	// since is when the Fleet began: no lease expires before one lease
	// period after it (graceUntil), since the workers could not renew
	// while the daemon was away.
	since time.Time

	claimMu sync.Mutex // one claim picks and starts at a time
	// registering is held (written) by a registration from its append to
	// its entry in workers, and (read) by Workers: a registration the
	// ledger shows is one the Fleet knows.
	registering sync.RWMutex

	mu        sync.Mutex
	projector *projections.Projector
	// claims are remote claims made here that the projector may not have
	// applied yet: job id → its plugin and the seq of its job.started.
	claims map[string]claimed
	// active are the remote leases believed to hold running jobs: job id →
	// plugin (claims add, completions and sweeps take away, each sweep
	// reads them again from the ledger).
	active  map[string]string
	workers map[string]events.WorkerRegisteredData // by worker name
	loaded  bool                                   // workers read from the ledger
	// leases is signaled when a lease was made; earliest is the earliest
	// lease_until made since the sweeper last took it (NextLease).
	leases   chan struct{}
	earliest time.Time
	// reports are the run reports of remote attempts, by job id, each for
	// the fence it was made for (RemoteReport).
	reports map[string]remoteReport
}

type remoteReport struct {
	fence  int64
	report *RunReport
}

type claimed struct {
	plugin string
	seq    int64
}

// NewFleet makes a Fleet.
func NewFleet(o FleetOptions) *Fleet {
	if o.LeasePeriod <= 0 {
		o.LeasePeriod = DefaultLeasePeriod
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Fleet{leasePeriod: o.LeasePeriod, now: o.Now, since: o.Now(), claims: map[string]claimed{}, active: map[string]string{},
		reports: map[string]remoteReport{},
		workers: map[string]events.WorkerRegisteredData{}, leases: make(chan struct{}, 1)}
}

// LeasePeriod is how long a claim or a renewal holds.
func (f *Fleet) LeasePeriod() time.Duration { return f.leasePeriod }

// graceUntil is when the leases found at the Fleet's start may first
// expire: one lease period after it. A worker renews a lease every third
// of the period, but while the daemon was down it could not, and the
// ledger holds only the renewals recorded (coalesced): a lease whose
// recorded lease_until passed while the daemon was away is given a whole
// period to be renewed before the sweeper ends its attempt as lost.
func (f *Fleet) graceUntil() time.Time { return f.since.Add(f.leasePeriod) }

// Now is the Fleet's clock.
func (f *Fleet) Now() time.Time { return f.now() }

// Watch gives the Fleet the projector whose progress wakes claims that
// wait for work and tells which claims it has applied. Until then a claim
// does not wait.
func (f *Fleet) Watch(p *projections.Projector) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.projector = p
}

// Leases is signaled (at most one pending) when a claim made a lease:
// the sweeper takes NextLease and arms its timer for it if it is earlier.
func (f *Fleet) Leases() <-chan struct{} { return f.leases }

// NextLease is the earliest lease_until a claim made since the last call
// (zero: none), forgotten once read.
func (f *Fleet) NextLease() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.earliest
	f.earliest = time.Time{}
	return t
}

// leased records a lease until until and signals Leases.
func (f *Fleet) leased(until time.Time) {
	f.mu.Lock()
	if f.earliest.IsZero() || until.Before(f.earliest) {
		f.earliest = until
	}
	f.mu.Unlock()
	select {
	case f.leases <- struct{}{}:
	default:
	}
}

// watcher is the projector, or nil.
func (f *Fleet) watcher() *projections.Projector {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.projector
}

// claimedAt records a claim of job id of plugin, started at seq.
func (f *Fleet) claimedAt(id, plugin string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims[id] = claimed{plugin: plugin, seq: seq}
	f.active[id] = plugin
}

// ended forgets the lease of job id: its attempt ended.
func (f *Fleet) ended(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.active, id)
}

// report is the run report of job id's attempt under fence, made by
// newReport the first time; a report of another fence is closed.
func (f *Fleet) report(ctx context.Context, id string, fence int64, newReport func() *RunReport) *RunReport {
	f.mu.Lock()
	old, ok := f.reports[id]
	if ok && old.fence == fence {
		f.mu.Unlock()
		return old.report
	}
	r := newReport()
	f.reports[id] = remoteReport{fence: fence, report: r}
	f.mu.Unlock()
	if ok {
		old.report.Close(ctx)
	}
	return r
}

// closeReport closes job id's run report, if it has one, flushing its last
// progress: before the attempt's completion.
func (f *Fleet) closeReport(ctx context.Context, id string) {
	f.mu.Lock()
	r, ok := f.reports[id]
	delete(f.reports, id)
	f.mu.Unlock()
	if ok {
		r.report.Close(ctx)
	}
}

// Close closes every remote attempt's run report (their writers stop):
// at the daemon's shutdown.
func (f *Fleet) Close(ctx context.Context) {
	f.mu.Lock()
	ids := make([]string, 0, len(f.reports))
	for id := range f.reports {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		f.closeReport(ctx, id)
	}
}

// swept sets the leases believed active to those a sweep read, plus the
// claims made since that the projection may not have shown it.
func (f *Fleet) swept(leases []Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active = make(map[string]string, len(leases))
	for _, l := range leases {
		f.active[l.JobID] = l.Plugin
	}
	for id, c := range f.claims {
		f.active[id] = c.plugin
	}
}

// ActiveRemote is how many jobs of plugin remote workers hold leases on:
// the dispatcher counts them toward the plugin's cap (runs_on: any).
func (f *Fleet) ActiveRemote(plugin string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.active {
		if p == plugin {
			n++
		}
	}
	return n
}

// unprojected are the claims the projector has not applied yet, by
// plugin (it forgets the others: job_queue counts them now).
func (f *Fleet) unprojected() map[string]map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	checkpoint := int64(-1)
	if f.projector != nil {
		checkpoint = f.projector.Checkpoint()
	}
	out := map[string]map[string]bool{}
	for id, c := range f.claims {
		if c.seq <= checkpoint {
			delete(f.claims, id)
			continue
		}
		if out[c.plugin] == nil {
			out[c.plugin] = map[string]bool{}
		}
		out[c.plugin][id] = true
	}
	return out
}

// register appends a worker's registration (appendIt) and records it, with
// no Workers in between: once the ledger shows a registration, the Fleet
// knows it (a job enqueued right after finds the plugin).
func (f *Fleet) register(w events.WorkerRegisteredData, appendIt func() error) error {
	f.registering.Lock()
	defer f.registering.Unlock()
	if err := appendIt(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers[w.Name] = w
	return nil
}

// Workers are the workers' registrations as last recorded, read from l
// the first time (with l nil, those known already: an Engine moved off
// its ledger keeps what it read).
func (f *Fleet) Workers(ctx context.Context, l *ledger.Ledger) (map[string]events.WorkerRegisteredData, error) {
	f.registering.RLock()
	defer f.registering.RUnlock()
	f.mu.Lock()
	loaded := f.loaded
	f.mu.Unlock()
	if !loaded && l != nil {
		found, err := ReadRegistrations(ctx, l)
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		for name, w := range found {
			if _, newer := f.workers[name]; !newer {
				f.workers[name] = w
			}
		}
		f.loaded = true
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]events.WorkerRegisteredData, len(f.workers))
	for name, w := range f.workers {
		out[name] = w
	}
	return out, nil
}

// ReadRegistrations reads the last registration of every worker stream,
// by worker name (config check reads them without a daemon).
func ReadRegistrations(ctx context.Context, l *ledger.Ledger) (map[string]events.WorkerRegisteredData, error) {
	var streams []string
	prefix := events.WorkerStream("")
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.FindStreamsByPrefix(conn, queries.FindStreamsByPrefixParams{From: prefix, Until: prefix[:len(prefix)-1] + "0", MaxStreams: 100000},
			func(s string) error {
				streams = append(streams, s)
				return nil
			})
	})
	if err != nil {
		return nil, fmt.Errorf("read the workers' registrations: %w", err)
	}
	out := map[string]events.WorkerRegisteredData{}
	for _, s := range streams {
		ev, ok, err := l.LastEvent(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("read the workers' registrations: %w", err)
		}
		if !ok || ev.Type != events.WorkerRegistered {
			continue
		}
		var w events.WorkerRegisteredData
		if err := json.Unmarshal(ev.Data, &w); err != nil {
			return nil, fmt.Errorf("read the registration of %s: %w", s, err)
		}
		out[w.Name] = w
	}
	return out, nil
}
