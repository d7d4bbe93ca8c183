package scheduler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/schedule"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

// fakeClock is a Clock that moves only when a test advances it. Each
// timer the loop makes is announced on made: the loop makes one just
// before it waits, so a test that sees it knows the loop is idle.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	made   chan struct{}
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	ch chan time.Time
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, made: make(chan struct{}, 1000)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	c.made <- struct{}{}
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, other := range t.c.timers {
		if other == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// set moves the clock to now and fires the timers due by then; it reports
// whether any fired.
func (c *fakeClock) set(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
	fired := false
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- now
		fired = true
	}
	c.timers = kept
	return fired
}

type testBundle struct {
	ctx   context.Context
	path  string
	l     *ledger.Ledger
	p     *projections.Projector
	clock *fakeClock
	s     *Scheduler
	start time.Time
}

// t0 is a Monday, 12:00:30 UTC.
var t0 = time.Date(2026, 3, 2, 12, 0, 30, 0, time.UTC)

// setup opens a real ledger with its projector, and a scheduler on a fake
// clock at now (not started).
func setup(t *testing.T, now time.Time) *testBundle {
	t.Helper()
	b := &testBundle{ctx: context.Background(), path: filepath.Join(t.TempDir(), "ductile.db"), start: now}
	b.open(t)
	b.restart(t, now)
	return b
}

func (b *testBundle) open(t *testing.T) {
	t.Helper()
	l, err := ledger.Open(b.ctx, b.path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	b.l = l
	b.p = projections.New(l, projections.Options{Logger: quiet})
	b.p.Start(b.ctx)
	t.Cleanup(func() {
		b.stop()
		b.p.Stop()
		require.NoError(t, l.Close())
	})
}

var quiet = slog.New(slog.NewTextHandler(debugOut(), &slog.HandlerOptions{Level: slog.LevelDebug}))

func debugOut() io.Writer {
	if os.Getenv("SCHED_DEBUG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// restart replaces the scheduler with a new one (as a daemon restart would),
// on a fake clock at now, not started.
func (b *testBundle) restart(t *testing.T, now time.Time) {
	t.Helper()
	b.stop()
	b.clock = newFakeClock(now)
	b.s = New(Options{Ledger: b.l, Clock: b.clock, Logger: quiet, Start: b.start})
}

func (b *testBundle) stop() {
	if b.s != nil {
		b.s.Stop()
	}
}

// run applies schedules and starts the loop, returning once it is idle.
func (b *testBundle) run(t *testing.T, schedules ...schedule.Schedule) {
	t.Helper()
	b.s.Apply(schedules)
	b.s.Start(b.ctx)
	b.settle(t)
}

// apply applies schedules to the running loop, returning once it is idle.
func (b *testBundle) apply(t *testing.T, schedules ...schedule.Schedule) {
	t.Helper()
	b.s.Apply(schedules)
	b.settle(t)
}

// settle waits until the loop waits on a timer with nothing else to do.
func (b *testBundle) settle(t *testing.T) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-b.clock.made:
		case <-deadline:
			t.Fatal("the scheduler loop did not go back to sleep")
		}
		if len(b.clock.made) == 0 && len(b.s.wake) == 0 {
			return
		}
	}
}

// advance moves the fake clock to now, one timer at a time, letting the
// loop run at each wake-up; no real time passes.
func (b *testBundle) advance(t *testing.T, now time.Time) {
	t.Helper()
	for {
		b.clock.mu.Lock()
		next := now
		for _, tm := range b.clock.timers {
			if tm.at.Before(next) {
				next = tm.at
			}
		}
		b.clock.mu.Unlock()
		if b.clock.set(next) {
			b.settle(t)
		}
		if !next.Before(now) {
			return
		}
	}
}

// record is one event of a schedule stream, decoded.
type record struct {
	ledger.Event
	fired   events.ScheduleFiredData
	skipped events.ScheduleSkippedData
}

// records reads a schedule's stream.
func (b *testBundle) records(t *testing.T, sc schedule.Schedule) []record {
	t.Helper()
	evs, err := b.l.ReadStream(b.ctx, sc.Stream())
	require.NoError(t, err)
	out := make([]record, len(evs))
	for i, ev := range evs {
		out[i].Event = ev
		switch ev.Type {
		case events.ScheduleFired:
			require.NoError(t, json.Unmarshal(ev.Data, &out[i].fired))
		case events.ScheduleSkipped:
			require.NoError(t, json.Unmarshal(ev.Data, &out[i].skipped))
		}
	}
	return out
}

// fired returns the nominal times of a schedule's firings, in order, and
// checks that each one's job was appended in the same transaction.
func (b *testBundle) fired(t *testing.T, sc schedule.Schedule) []time.Time {
	t.Helper()
	var out []time.Time
	for _, r := range b.records(t, sc) {
		if r.Type != events.ScheduleFired {
			continue
		}
		job, err := b.l.ReadStream(b.ctx, events.JobStream(r.fired.JobID))
		require.NoError(t, err)
		require.NotEmpty(t, job, "the firing's job exists")
		require.Equal(t, events.JobEnqueued, job[0].Type)
		require.Equal(t, r.RecordedAt, job[0].RecordedAt, "the firing and its job commit together")
		var enq events.Enqueued
		require.NoError(t, json.Unmarshal(job[0].Data, &enq))
		require.Equal(t, sc.Plugin, enq.Plugin)
		require.Equal(t, sc.Entry.Command, enq.Command)
		require.Equal(t, events.ActorScheduler, enq.SubmittedBy)
		out = append(out, r.fired.Slot.Nominal)
	}
	return out
}

// newEntry returns an every:/cron: entry (cron when spec has spaces) running
// command, queued beside its previous jobs.
func newEntry(t *testing.T, spec string) schedule.Entry {
	t.Helper()
	e := schedule.Entry{ID: "default", Command: "sync", IfRunning: schedule.IfRunningQueue}
	var err error
	if strings.Contains(spec, " ") {
		e.Kind = schedule.KindCron
		e.Rule, err = schedule.ParseCron(spec)
	} else {
		e.Kind = schedule.KindEvery
		e.Rule, err = schedule.ParseEvery(spec)
	}
	require.NoError(t, err)
	return e
}

func sched(e schedule.Entry) schedule.Schedule {
	return schedule.Schedule{Plugin: "echo", Entry: e, MaxOutstandingPolls: 1}
}

// times returns t0's day at the given UTC clock readings.
func times(base time.Time, clock ...string) []time.Time {
	out := make([]time.Time, len(clock))
	for i, c := range clock {
		d, err := time.Parse("15:04:05", c)
		if err != nil {
			panic(err)
		}
		out[i] = time.Date(base.Year(), base.Month(), base.Day(), d.Hour(), d.Minute(), d.Second(), 0, base.Location()).UTC()
	}
	return out
}
