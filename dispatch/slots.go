package dispatch

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// slots are the dispatcher's worker slots and what it remembers of the jobs
// it owns. A job holds a slot while its plugin's process runs; it stays
// owned until its outcome is recorded, and then settling until the
// projector has applied that record, so that a lagging projection never
// offers it again. It counts toward its plugin's parallelism cap until its
// outcome is recorded: a next job of a serial plugin must start with the
// state that outcome leaves. The Dispatcher's mu guards them.
type slots struct {
	max       int
	inUse     int                     // slots held: plugin processes running or starting
	perPlugin map[string]int          // jobs per plugin counted toward its cap
	running   map[string]*ownedJob    // jobs owned: starting, running, or recording their outcome
	settling  map[string]int64        // finished jobs → the seq the projector must pass
	capacity  func(plugin string) int // a plugin's parallelism cap
}

// ownedJob is a job a worker of this dispatcher runs.
type ownedJob struct {
	candidate
	holdsSlot bool // its plugin process is running (or starting)
	counted   bool // it counts toward its plugin's cap (until its outcome is recorded)
	cancel    context.CancelCauseFunc
}

// candidate is a queued job as the dispatcher knows it.
type candidate struct {
	id, plugin, command, dedupeKey string
	seq                            int64
	retryAt                        time.Time
	// traceID is the job's trace id, given to its plugin.
	traceID string
}

func newSlots(max int, capacity func(plugin string) int) slots {
	return slots{
		max: max, capacity: capacity,
		perPlugin: map[string]int{}, running: map[string]*ownedJob{}, settling: map[string]int64{},
	}
}

func (s *slots) free() int { return max(0, s.max-s.inUse) } // a reload may shrink max below inUse

// claim takes a slot for c, whose worker cancel stops.
func (s *slots) claim(c candidate, cancel context.CancelCauseFunc) {
	s.running[c.id] = &ownedJob{candidate: c, holdsSlot: true, counted: true, cancel: cancel}
	s.inUse++
	s.perPlugin[c.plugin]++
}

// release frees c's slot, its plugin's process having exited, if it still
// holds one, and reports whether it did. c still counts toward its plugin's
// cap until finish.
func (s *slots) release(c candidate) bool {
	j, ok := s.running[c.id]
	if !ok || !j.holdsSlot {
		return false
	}
	j.holdsSlot = false
	s.inUse--
	return true
}

// finish forgets c, its outcome recorded (or its start refused), releasing
// its slot if it still holds one (it never got a process) and its place in
// its plugin's cap; a settle seq above 0 keeps it settling until the
// projector passes that seq.
func (s *slots) finish(c candidate, settle int64) {
	s.release(c)
	if j, ok := s.running[c.id]; ok && j.counted {
		s.perPlugin[c.plugin]--
	}
	delete(s.running, c.id)
	if settle > 0 {
		s.settling[c.id] = settle
	}
}

// handOver gives exited's place in its plugin's cap away (to a job of the
// same plugin that takes its slot: that job's start is recorded after
// exited's outcome, in the same transaction, commands.HandOff), or takes it
// back (keep).
func (s *slots) handOver(exited candidate, keep bool) {
	j, ok := s.running[exited.id]
	if !ok || j.counted == keep {
		return
	}
	j.counted = keep
	if keep {
		s.perPlugin[exited.plugin]++
	} else {
		s.perPlugin[exited.plugin]--
	}
}

// settled forgets the settling jobs the projector has passed.
func (s *slots) settled(checkpoint int64) {
	for id, seq := range s.settling {
		if seq <= checkpoint {
			delete(s.settling, id)
		}
	}
}

// owned reports whether c is a job this dispatcher runs, or one whose end
// the projection has not caught up with yet.
func (s *slots) owned(c candidate) bool {
	_, mine := s.running[c.id]
	_, settling := s.settling[c.id]
	return mine || settling
}

// held reports whether c may not start now even with a free slot: its
// plugin is at its parallelism cap, or a job with its dedupe key and target
// runs.
func (s *slots) held(c candidate) bool {
	return s.perPlugin[c.plugin] >= s.capacity(c.plugin) || (c.dedupeKey != "" && s.sameKeyRunning(c))
}

func (s *slots) sameKeyRunning(c candidate) bool {
	for _, j := range s.running {
		if j.holdsSlot && j.dedupeKey == c.dedupeKey && j.plugin == c.plugin && j.command == c.command {
			return true
		}
	}
	return false
}

// cappedPlugins is a JSON array of the plugins at their parallelism cap
// now and of remoteOnly (runs_on: remote), sorted, for the queue's read to
// leave out.
func (s *slots) cappedPlugins(remoteOnly []string) string {
	names := slices.Clone(remoteOnly)
	for name, n := range s.perPlugin {
		// A cap as large as the pool never excludes anything the pool allows.
		if capacity := s.capacity(name); capacity < s.max && n >= capacity && !slices.Contains(remoteOnly, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "[]"
	}
	slices.Sort(names)
	b, _ := json.Marshal(names)
	return string(b)
}

// cancel stops the owned job id, if it runs here, for cause.
func (s *slots) cancel(id string, cause error) {
	if j, ok := s.running[id]; ok {
		j.cancel(cause)
	}
}

// cancelAll stops every owned job for cause.
func (s *slots) cancelAll(cause error) {
	for _, j := range s.running {
		j.cancel(cause)
	}
}
