package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/schedule"
)

// MaxSleep caps one sleep: Go's timers run on the monotonic clock, which
// stops while the machine is suspended, so the loop wakes at least this
// often to re-plan with the wall clock.
const MaxSleep = time.Minute

// Options configure a Scheduler.
type Options struct {
	Ledger *ledger.Ledger
	Clock  Clock // nil: SystemClock
	Logger *slog.Logger
	// Start is when the service started: a schedule applied with no Start
	// gets this one (an after: entry counts from it).
	Start time.Time
	// Job returns the job a firing of plugin's command enqueues, with the
	// config's retry defaults (commands.JobFor); nil: config.Default()'s.
	Job func(plugin, command string) commands.Enqueue
	// Admit is the circuit breaker's hook (commands.Admit); nil admits.
	Admit commands.Admit
}

// Scheduler runs a set of schedules. Apply sets them, Start runs the loop,
// Stop ends it.
type Scheduler struct {
	opts  Options
	clock Clock
	log   *slog.Logger

	mu      sync.Mutex
	applied []schedule.Schedule // set by Apply, taken by the loop
	fresh   bool                // applied not taken yet
	wake    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}

	// Owned by the loop.
	entries map[string]*entry
}

// entry is the loop's state of one schedule.
type entry struct {
	s       schedule.Schedule
	loaded  bool           // last and version read from the ledger
	moved   bool           // the last record was refused: the stream had moved
	version int64          // of its stream
	last    *schedule.Slot // of its newest event
	retryAt time.Time      // after a failed append
	backoff time.Duration
}

// New returns a scheduler with no schedules.
func New(opts Options) *Scheduler {
	s := &Scheduler{opts: opts, clock: opts.Clock, log: opts.Logger, wake: make(chan struct{}, 1), entries: map[string]*entry{}}
	if s.clock == nil {
		s.clock = SystemClock{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("component", "scheduler")
	if s.opts.Job == nil {
		cfg := config.Default()
		s.opts.Job = func(plugin, command string) commands.Enqueue {
			return commands.JobFor(cfg, plugin, command, events.ActorScheduler)
		}
	}
	return s
}

// Apply replaces the set of schedules, at once: entries not in it stop,
// new and changed ones plan from the newest Slot of their stream, the
// others go on as they were. An entry is known by its plugin and id.
func (s *Scheduler) Apply(schedules []schedule.Schedule) {
	s.mu.Lock()
	s.applied, s.fresh = slices.Clone(schedules), true
	s.mu.Unlock()
	s.poke()
}

// Start runs the loop until Stop or the end of ctx.
func (s *Scheduler) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.cancel, s.done = cancel, make(chan struct{})
	done := s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		s.run(ctx)
	}()
}

// Stop ends the loop and waits for it; a firing being recorded is
// recorded first.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) run(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case <-s.wake: // what woke it is taken in this round
		default:
		}
		s.takeApplied()
		now := s.clock.Now()
		sleep := MaxSleep
		for _, key := range sortedKeys(s.entries) {
			if ctx.Err() != nil {
				return
			}
			sleep = min(sleep, s.step(ctx, s.entries[key], now))
		}
		if sleep <= 0 {
			continue
		}
		t := s.clock.NewTimer(sleep)
		select {
		case <-t.C():
		case <-s.wake:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// takeApplied installs the schedules Apply gave, if new ones came.
func (s *Scheduler) takeApplied() {
	s.mu.Lock()
	applied, fresh := s.applied, s.fresh
	s.fresh = false
	s.mu.Unlock()
	if !fresh {
		return
	}
	entries := make(map[string]*entry, len(applied))
	for _, sc := range applied {
		if sc.Start.IsZero() {
			sc.Start = s.opts.Start
		}
		key := sc.Stream()
		if old, ok := s.entries[key]; ok && reflect.DeepEqual(old.s, sc) {
			entries[key] = old
			continue
		}
		entries[key] = &entry{s: sc}
	}
	for key := range s.entries {
		if _, ok := entries[key]; !ok {
			s.log.Debug("schedule removed", "schedule", key)
		}
	}
	s.entries = entries
}

// step plans one entry at now, records what is due, and returns how long
// until it next needs the loop.
func (s *Scheduler) step(ctx context.Context, e *entry, now time.Time) time.Duration {
	stream := e.s.Stream()
	if e.retryAt.After(now) {
		return e.retryAt.Sub(now)
	}
	fail := func(what string, err error) time.Duration {
		e.backoff = min(max(2*e.backoff, time.Second), MaxSleep)
		e.retryAt = now.Add(e.backoff)
		s.log.Warn("schedule: "+what+"; trying again", "schedule", stream, "err", err, "retry_in", e.backoff)
		return e.backoff
	}
	if !e.loaded {
		if err := s.load(ctx, e); err != nil {
			return fail("cannot read its last firing", err)
		}
	}
	plan := e.s.Plan(e.last, now)
	if len(plan.Fire) > 0 || plan.Skip != nil {
		polls, err := s.polls(ctx, e.s)
		if err != nil {
			return fail("cannot read the plugin's poll jobs", err)
		}
		res, err := commands.FireScheduleJobs(ctx, s.opts.Ledger, commands.FireSchedule{
			Schedule: e.s, Version: e.version, Plan: plan, Job: s.opts.Job(e.s.Plugin, e.s.Entry.Command),
			Polls: polls, Admit: s.opts.Admit, Now: now,
		})
		var conflict *ledger.VersionConflictError
		switch {
		case errors.As(err, &conflict) && conflict.Stream == stream && !e.moved:
			// Another writer recorded firings since it was read: read again,
			// at once the first time (a second conflict in a row backs off).
			s.log.Warn("schedule: its stream moved under it; reading it again", "schedule", stream, "err", err)
			e.loaded, e.moved = false, true
			return 0
		case err != nil:
			if ctx.Err() != nil {
				return MaxSleep
			}
			return fail("cannot record its firing", err)
		}
		e.version, e.last, e.backoff, e.moved = res.Version, res.Last, 0, false
		for _, k := range res.Skipped {
			s.log.Info("schedule skipped", "schedule", stream, "due", k.Slot.Due, "count", k.Count, "reason", k.Reason)
		}
		for _, f := range res.Fired {
			s.log.Debug("schedule fired", "schedule", stream, "job_id", f.JobID, "command", f.Command,
				"due", f.Slot.Due, "late", now.Sub(f.Slot.Due), "action", f.Action)
		}
	}
	if plan.Next == nil {
		return MaxSleep
	}
	return plan.Next.Due.Sub(now)
}

// load reads the entry's stream's newest event.
func (s *Scheduler) load(ctx context.Context, e *entry) error {
	var last *schedule.Slot
	var version int64
	err := s.opts.Ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamLast(conn, e.s.Stream(), func(r queries.ReadStreamLastRow) error {
			recorded, err := events.ScheduleSlot([]byte(r.Data))
			if err != nil {
				return fmt.Errorf("decode %s v%d: %w", r.Stream, r.Version, err)
			}
			slot := schedule.Slot(recorded)
			last, version = &slot, r.Version
			return nil
		})
	})
	if err != nil {
		return err
	}
	e.last, e.version, e.loaded = last, version, true
	return nil
}

// polls returns the plugin's poll jobs queued or running, from job_queue,
// for a schedule that runs poll.
func (s *Scheduler) polls(ctx context.Context, sc schedule.Schedule) ([]string, error) {
	if sc.Entry.Command != schedule.PollCommand {
		return nil, nil
	}
	var ids []string
	err := s.opts.Ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ListOutstandingJobs(conn, queries.ListOutstandingJobsParams{Plugin: sc.Plugin, Command: schedule.PollCommand},
			func(r queries.ListOutstandingJobsRow) error {
				ids = append(ids, r.ID)
				return nil
			})
	})
	return ids, err
}

func sortedKeys(m map[string]*entry) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
