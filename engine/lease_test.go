package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// clock is a test's time: the Fleet reads it, the test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// leaseBundle is an Engine on a real ledger whose plugin render runs on
// remote workers only and is not installed here, with a running projector
// and a Fleet on a test clock.
type leaseBundle struct {
	ctx   context.Context
	l     *ledger.Ledger
	p     *projections.Projector
	eng   *engine.Engine
	clock *clock
}

const leasePeriod = 30 * time.Second

func setupLeases(t *testing.T, render func(*config.PluginConfig), tune ...func(*config.Config)) *leaseBundle {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	t.Cleanup(func() {
		p.Stop()
		require.NoError(t, l.Close())
	})
	cfg := config.Default()
	pc := config.DefaultPlugin()
	pc.RunsOn = config.RunsRemote
	pc.Retry.MaxAttempts = 2
	pc.Config = map[string]any{"size": "large"}
	if render != nil {
		render(&pc)
	}
	cfg.Plugins["render"] = pc
	for _, f := range tune {
		f(cfg)
	}
	c := &clock{t: time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)}
	fleet := engine.NewFleet(engine.FleetOptions{LeasePeriod: leasePeriod, Now: c.Now})
	fleet.Watch(p)
	eng := engine.New(engine.Options{Ledger: l, Config: cfg, Fleet: fleet})
	return &leaseBundle{ctx: ctx, l: l, p: p, eng: eng, clock: c}
}

// register registers worker name serving render.
func (b *leaseBundle) register(t *testing.T, name string, concurrencySafe bool) events.Worker {
	t.Helper()
	require.NoError(t, b.eng.RegisterWorker(b.ctx, events.WorkerRegisteredData{Name: name, Host: name + ".lan", Version: "test",
		Plugins: []events.WorkerPlugin{{Name: "render", Version: "1.0.0", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}},
			ConcurrencySafe: concurrencySafe, FactOutputs: []events.WorkerFactOutput{{Command: "handle", From: "state_updates", FactType: "render.last"}}}}}))
	return events.Worker{Name: name, PID: 7}
}

// enqueue enqueues a render job and waits for the projector to apply it.
func (b *leaseBundle) enqueue(t *testing.T) string {
	t.Helper()
	res, err := b.eng.Enqueue(b.ctx, engine.Enqueue{Plugin: "render", Command: "handle", Payload: []byte(`{"frame":1}`), By: events.ActorAPI, Now: b.clock.Now()})
	require.NoError(t, err)
	b.settle(t)
	return res.JobID
}

// settle waits until the projector has applied everything recorded.
func (b *leaseBundle) settle(t *testing.T) {
	t.Helper()
	head, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, b.p.WaitFor(ctx, head))
}

func (b *leaseBundle) job(t *testing.T, id string) (*commands.Job, []ledger.Event) {
	t.Helper()
	evs, err := b.l.ReadStream(b.ctx, events.JobStream(id))
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	return j, evs
}

func count(evs []ledger.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// A plugin placed remote and not installed here is enqueued from a
// worker's registration; its claim records the lease on job.started and
// gives the worker what its plugin runs with.
func TestClaimGivesTheJobUnderALease(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil)
	_, err := b.eng.Enqueue(b.ctx, engine.Enqueue{Plugin: "render", Command: "handle", Payload: []byte(`{}`), By: events.ActorAPI})
	require.ErrorIs(t, err, commands.ErrPluginUnrunnable)
	require.ErrorContains(t, err, "no worker serving it has registered yet")
	_, err = b.eng.Claim(b.ctx, events.Worker{Name: "w1"}, nil, 0)
	require.ErrorIs(t, err, engine.ErrUnknownWorker)

	w := b.register(t, "w1", true)
	id := b.enqueue(t)
	c, err := b.eng.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, id, c.JobID)
	require.Equal(t, "handle", c.Command)
	require.Equal(t, 1, c.Attempt)
	require.Equal(t, int64(2), c.Fence, "the version of job.started on the job's stream")
	require.Equal(t, b.clock.Now().Add(leasePeriod), c.LeaseUntil)
	require.Equal(t, b.clock.Now().Add(config.DefaultHandleTimeout), c.DeadlineAt)
	require.JSONEq(t, `{"size":"large"}`, string(c.Request.Config))
	require.JSONEq(t, `{}`, string(c.Request.Context))
	require.Contains(t, string(c.Request.Event), `"frame":1`)

	j, evs := b.job(t, id)
	require.Equal(t, events.StatusRunning, j.Status)
	require.Equal(t, &events.Lease{Worker: "w1", Fence: 2, LeaseUntil: commands.Time(c.LeaseUntil)}, j.Leased())
	require.Equal(t, events.ActorWorker, meta(t, evs[1]).Actor)

	again, err := b.eng.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	require.Nil(t, again, "nothing else is queued")
}

func meta(t *testing.T, ev ledger.Event) ledger.Meta {
	t.Helper()
	m, err := ev.Metadata()
	require.NoError(t, err)
	return m
}

// Claims racing from two workers never get the same job, and every job is
// claimed.
func TestConcurrentClaimsNeverShareAJob(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil)
	workers := []events.Worker{b.register(t, "w1", true), b.register(t, "w2", true)}
	const jobs = 40
	want := map[string]bool{}
	for range jobs {
		want[b.enqueue(t)] = true
	}
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			w := workers[i%2]
			for {
				c, err := b.eng.Claim(b.ctx, w, nil, 0)
				if !assertNoError(t, err) || c == nil {
					return
				}
				mu.Lock()
				prev, dup := got[c.JobID]
				got[c.JobID] = w.Name
				mu.Unlock()
				if dup {
					t.Errorf("job %s claimed by %s and %s", c.JobID, prev, w.Name)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, got, jobs)
	for id := range want {
		j, evs := b.job(t, id)
		require.Equal(t, events.StatusRunning, j.Status)
		require.Equal(t, 1, count(evs, events.JobStarted), id)
	}
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// A plugin that is not concurrency-safe runs one job at a time across
// workers; a claim waiting for work is woken by the completion that frees
// the plugin, without polling.
func TestClaimKeepsTheCapAndWaitsForIt(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil)
	w1, w2 := b.register(t, "w1", false), b.register(t, "w2", false)
	first, second := b.enqueue(t), b.enqueue(t)
	c, err := b.eng.Claim(b.ctx, w1, nil, 0)
	require.NoError(t, err)
	require.Equal(t, first, c.JobID, "oldest first")
	none, err := b.eng.Claim(b.ctx, w2, nil, 0)
	require.NoError(t, err)
	require.Nil(t, none, "render is at its cap of 1")

	claimed := make(chan *engine.Claimed, 1)
	go func() {
		c, err := b.eng.Claim(b.ctx, w2, []string{"render"}, time.Minute)
		assertNoError(t, err)
		claimed <- c
	}()
	_, err = b.eng.CompleteRemote(b.ctx, c.Fence, engine.Attempt{JobID: first, Attempt: 1, Worker: w1, Kind: events.OutcomeOK,
		Response: []byte(`{"status":"ok","state_updates":{"n":1}}`)})
	require.NoError(t, err)
	next := <-claimed
	require.NotNil(t, next, "the completion freed render: the waiting claim got the next job")
	require.Equal(t, second, next.JobID)

	j, evs := b.job(t, first)
	require.Equal(t, events.StatusSucceeded, j.Status)
	require.Equal(t, 1, count(evs, events.JobSucceeded))
	facts, err := b.l.ReadStream(b.ctx, events.PluginStream("render"))
	require.NoError(t, err)
	require.Equal(t, 1, count(facts, events.PluginFactRecorded), "the fact_outputs the worker registered apply, as a local success's")
}

// Renewals are coalesced to one job.lease_renewed per third of the lease
// period, and the answer carries a cancel request.
func TestRenewIsCoalescedAndCarriesCancel(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil)
	w := b.register(t, "w1", true)
	id := b.enqueue(t)
	c, err := b.eng.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	f := commands.Fenced{Worker: w.Name, Attempt: c.Attempt, Fence: c.Fence}
	_, err = b.eng.Renew(b.ctx, id, commands.Fenced{Worker: w.Name, Attempt: c.Attempt, Fence: c.Fence - 1})
	var stale *engine.StaleFenceError
	require.ErrorAs(t, err, &stale, "a renewal with a stale fence")

	for range 5 {
		b.clock.add(time.Second)
		r, err := b.eng.Renew(b.ctx, id, f)
		require.NoError(t, err)
		require.False(t, r.Recorded)
		require.Equal(t, c.LeaseUntil, r.LeaseUntil, "coalesced: the lease recorded holds")
	}
	b.clock.add(leasePeriod/3 - 5*time.Second)
	r, err := b.eng.Renew(b.ctx, id, f)
	require.NoError(t, err)
	require.True(t, r.Recorded)
	require.Equal(t, b.clock.Now().Add(leasePeriod), r.LeaseUntil)
	require.False(t, r.CancelRequested)
	_, evs := b.job(t, id)
	require.Equal(t, 1, count(evs, events.JobLeaseRenewed))
	require.Equal(t, 1, count(evs, events.JobSuperseded))

	_, err = b.eng.Cancel(b.ctx, engine.Cancel{Job: id, Reason: "enough", By: events.ActorCLI, Now: b.clock.Now()})
	require.NoError(t, err)
	r, err = b.eng.Renew(b.ctx, id, f)
	require.NoError(t, err)
	require.True(t, r.CancelRequested, "the worker learns of the cancel at its next renewal")
	done, err := b.eng.CompleteRemote(b.ctx, c.Fence, engine.Attempt{JobID: id, Attempt: 1, Worker: w, Kind: events.OutcomeCanceled, ExitCode: -1})
	require.NoError(t, err)
	require.Equal(t, events.StatusCanceled, done.Status)

	_, err = b.eng.Renew(b.ctx, id, f)
	require.ErrorAs(t, err, &stale, "the job ended: its lease holds nothing")
}

// A completion with a stale fence changes nothing but is recorded as
// superseded; of two completions racing with one fence, one applies.
func TestStaleFenceIsSupersededAndAJobCompletesOnce(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil)
	w := b.register(t, "w1", true)
	id := b.enqueue(t)
	c, err := b.eng.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	ok := engine.Attempt{JobID: id, Attempt: 1, Worker: w, Kind: events.OutcomeOK, Response: []byte(`{"status":"ok","result":{"n":2}}`)}

	_, err = b.eng.CompleteRemote(b.ctx, c.Fence+7, ok)
	var stale *engine.StaleFenceError
	require.ErrorAs(t, err, &stale)
	require.ErrorIs(t, err, commands.ErrStaleFence)
	require.Equal(t, c.Fence, stale.Current)
	j, evs := b.job(t, id)
	require.Equal(t, events.StatusRunning, j.Status, "nothing applied")
	require.Equal(t, 1, count(evs, events.JobSuperseded))

	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := b.eng.CompleteRemote(b.ctx, c.Fence, ok)
			errs <- err
		}()
	}
	var applied, superseded int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
			applied++
		case errors.As(err, &stale):
			superseded++
		default:
			t.Fatal(err)
		}
	}
	require.Equal(t, 1, applied)
	require.Equal(t, 1, superseded)
	j, evs = b.job(t, id)
	require.Equal(t, events.StatusSucceeded, j.Status)
	require.Equal(t, 1, count(evs, events.JobSucceeded))
	require.Equal(t, 2, count(evs, events.JobSuperseded))
	run, err := views.ReadRunRecord(b.ctx, b.l, id)
	require.NoError(t, err, "the read side folds a remote job's stream")
	require.Equal(t, "succeeded", string(run.Status))

	// A log batch with the old fence is superseded too.
	err = b.eng.RecordRemoteStderr(b.ctx, commands.Fenced{Worker: w.Name, Attempt: 1, Fence: c.Fence},
		commands.StderrLines{JobID: id, Line: 1, Lines: []events.StderrLine{{At: commands.Time(b.clock.Now()), Text: "late"}}})
	require.ErrorAs(t, err, &stale)
	_, evs = b.job(t, id)
	require.Equal(t, 0, count(evs, events.JobStderrWritten))
}

// The sweep ends an attempt whose lease ran out as lost (the retry policy
// decides), and the late worker's completion is superseded; a remote
// attempt past its deadline times out though its lease is renewed.
func TestSweepExpiresLeasesAndDeadlines(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, func(pc *config.PluginConfig) { pc.Timeouts.Handle = 50 * time.Second })
	w1, w2 := b.register(t, "w1", true), b.register(t, "w2", true)
	log := testLogger(t)
	id := b.enqueue(t)
	c, err := b.eng.Claim(b.ctx, w1, nil, 0)
	require.NoError(t, err)

	next, err := b.eng.Sweep(b.ctx, log)
	require.NoError(t, err)
	require.Equal(t, c.LeaseUntil, next, "the sweeper's timer: the lease's end")
	b.clock.add(leasePeriod - time.Nanosecond)
	_, err = b.eng.Sweep(b.ctx, log)
	require.NoError(t, err)
	j, _ := b.job(t, id)
	require.Equal(t, events.StatusRunning, j.Status, "the lease still holds")

	b.clock.add(time.Nanosecond)
	next, err = b.eng.Sweep(b.ctx, log)
	require.NoError(t, err)
	require.True(t, next.IsZero(), "no lease left")
	j, evs := b.job(t, id)
	require.Equal(t, events.StatusQueued, j.Status, "retried: attempt 2 of 2")
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, commands.LeaseExpiredReason, j.LastError)
	require.Equal(t, 1, count(evs, events.JobRecovered))

	_, err = b.eng.CompleteRemote(b.ctx, c.Fence, engine.Attempt{JobID: id, Attempt: 1, Worker: w1, Kind: events.OutcomeOK, Response: []byte(`{"status":"ok"}`)})
	var stale *engine.StaleFenceError
	require.ErrorAs(t, err, &stale, "the late worker's completion")

	b.settle(t)
	c2, err := b.eng.Claim(b.ctx, w2, nil, 0)
	require.NoError(t, err)
	require.Equal(t, id, c2.JobID)
	require.Greater(t, c2.Fence, c.Fence, "the fence only grows")
	for range 5 { // renewed, but the deadline (50s) passes
		b.clock.add(leasePeriod / 3)
		_, err := b.eng.Renew(b.ctx, id, commands.Fenced{Worker: w2.Name, Attempt: 2, Fence: c2.Fence})
		require.NoError(t, err)
		_, err = b.eng.Sweep(b.ctx, log)
		require.NoError(t, err)
	}
	j, evs = b.job(t, id)
	require.Equal(t, events.StatusDead, j.Status, "timed out on its last attempt")
	require.Equal(t, 1, count(evs, events.JobTimedOut))
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// A worker registers its plugins as their manifests declare them; a
// registration the daemon could not use is refused, nothing recorded.
func TestRegistration(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	echo, ok := f.eng.Plugins().Get("echo")
	require.True(t, ok)
	wp := engine.WorkerPluginOf(echo)
	require.Equal(t, events.WorkerPlugin{Name: "echo", Version: "1.0.0", ConcurrencySafe: true,
		Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}, {Name: "poll", Type: "read"}}}, sortedCommands(wp))

	for _, bad := range []events.WorkerRegisteredData{
		{Name: ""}, {Name: "a/b"},
		{Name: "w", Plugins: []events.WorkerPlugin{{Name: "echo"}}},
		{Name: "w", Plugins: []events.WorkerPlugin{wp, wp}},
		{Name: "w", Plugins: []events.WorkerPlugin{{Name: "x", Commands: wp.Commands, FactOutputs: []events.WorkerFactOutput{{Command: "poll", From: "stdout", FactType: "x"}}}}},
	} {
		require.ErrorIs(t, f.eng.RegisterWorker(f.ctx, bad), commands.ErrInvalidCommand, "%+v", bad)
	}
	head := f.head(t)
	require.NoError(t, f.eng.RegisterWorker(f.ctx, events.WorkerRegisteredData{Name: "w", Host: "h", Version: "v", Plugins: []events.WorkerPlugin{wp}}))
	require.Equal(t, head+1, f.head(t))
	workers, err := f.eng.Workers(f.ctx)
	require.NoError(t, err)
	require.Equal(t, []events.WorkerPlugin{wp}, workers["w"].Plugins)
	fresh, err := engine.New(engine.Options{Ledger: f.l, Config: f.cfg}).Workers(f.ctx)
	require.NoError(t, err)
	require.Equal(t, workers, fresh, "a restarted daemon reads the registrations from the ledger")
}

func sortedCommands(wp events.WorkerPlugin) events.WorkerPlugin {
	slices.SortFunc(wp.Commands, func(a, b events.AppliedCommand) int { return strings.Compare(a.Name, b.Name) })
	return wp
}

// A route to a plugin only remote workers serve makes its job, as a route
// to a local plugin does: the completion checks the target against the
// workers' registrations.
func TestRoutesReachRemotePlugins(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil, func(cfg *config.Config) {
		cfg.Routes = append(cfg.Routes, config.Route{From: "echo", EventType: "echo.done", To: "render", Command: "handle"})
	})
	b.register(t, "w1", true)
	enq, err := commands.EnqueueJob(b.ctx, b.l, commands.JobFor(b.eng.Config(), "echo", "poll", events.ActorCLI))
	require.NoError(t, err)
	_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: enq.JobID, Timeout: time.Minute, Now: b.clock.Now()})
	require.NoError(t, err)
	done, err := b.eng.Complete(b.ctx, engine.Attempt{JobID: enq.JobID, Attempt: 1, Kind: events.OutcomeOK,
		Response: []byte(`{"status":"ok","events":[{"type":"echo.done","payload":{"frame":3}}]}`)})
	require.NoError(t, err)
	require.Empty(t, done.Dropped)
	require.Len(t, done.Enqueued, 1)
	require.Equal(t, "render", done.Enqueued[0].Plugin)
}

// A remote attempt's progress goes through one run report across the
// worker's requests, flushed before its completion; a stale fence gets
// none.
func TestRemoteReport(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil)
	w := b.register(t, "w1", true)
	id := b.enqueue(t)
	c, err := b.eng.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	f := commands.Fenced{Worker: w.Name, Attempt: c.Attempt, Fence: c.Fence}

	_, err = b.eng.RemoteReport(b.ctx, id, commands.Fenced{Worker: w.Name, Attempt: 1, Fence: c.Fence + 1})
	var stale *engine.StaleFenceError
	require.ErrorAs(t, err, &stale)
	r1, err := b.eng.RemoteReport(b.ctx, id, f)
	require.NoError(t, err)
	r2, err := b.eng.RemoteReport(b.ctx, id, f)
	require.NoError(t, err)
	require.Same(t, r1, r2, "one report per attempt")
	half, most := 0.5, 0.9
	r1.Progress(events.Progressed{Attempt: 1, Progress: &half, Stage: "render"})
	r2.Progress(events.Progressed{Attempt: 1, Progress: &most})
	_, err = b.eng.CompleteRemote(b.ctx, c.Fence, engine.Attempt{JobID: id, Attempt: 1, Worker: w, Kind: events.OutcomeOK, Response: []byte(`{"status":"ok"}`)})
	require.NoError(t, err)
	j, evs := b.job(t, id)
	require.Equal(t, events.StatusSucceeded, j.Status)
	require.NotZero(t, count(evs, events.JobProgressed))
	last := -1
	for i, ev := range evs {
		if ev.Type == events.JobProgressed {
			last = i
		}
	}
	require.Contains(t, string(evs[last].Data), `"progress":0.9`, "the last progress landed before the end")
	require.Less(t, last, len(evs)-1)
}

// A daemon that starts again after its workers' leases ran out (as
// recorded: renewals are coalesced, and none could be made while it was
// down) gives each lease one whole lease period to be renewed before its
// sweeper ends the attempt as lost.
func TestARestartedDaemonGivesLeasesAPeriodToBeRenewed(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil)
	w := b.register(t, "w1", true)
	log := testLogger(t)
	renewed, lost := b.enqueue(t), b.enqueue(t)
	c1, err := b.eng.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	c2, err := b.eng.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	fence := map[string]int64{c1.JobID: c1.Fence, c2.JobID: c2.Fence}

	b.clock.add(2 * leasePeriod) // the daemon was down for two periods
	restarted := engine.NewFleet(engine.FleetOptions{LeasePeriod: leasePeriod, Now: b.clock.Now})
	restarted.Watch(b.p)
	eng := engine.New(engine.Options{Ledger: b.l, Config: b.eng.Config(), Fleet: restarted})

	next, err := eng.Sweep(b.ctx, log)
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(leasePeriod), next, "the sweeper wakes when the grace ends")
	for _, id := range []string{renewed, lost} {
		j, _ := b.job(t, id)
		require.Equal(t, events.StatusRunning, j.Status, "the lease ran out while the daemon was down, but the grace holds")
	}

	b.clock.add(time.Second) // the worker reaches the new daemon and renews one job
	_, err = eng.Renew(b.ctx, renewed, commands.Fenced{Worker: w.Name, Attempt: 1, Fence: fence[renewed]})
	require.NoError(t, err)

	b.clock.add(leasePeriod - time.Second) // the grace is over
	_, err = eng.Sweep(b.ctx, log)
	require.NoError(t, err)
	j, evs := b.job(t, renewed)
	require.Equal(t, events.StatusRunning, j.Status, "renewed within the grace: still held")
	require.Zero(t, count(evs, events.JobRecovered))
	j, evs = b.job(t, lost)
	require.Equal(t, events.StatusQueued, j.Status, "not renewed within the grace: lost and retried")
	require.Equal(t, 1, count(evs, events.JobRecovered))
}
