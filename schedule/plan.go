package schedule

import (
	"fmt"
	"strings"
	"time"
)

// Grace is how late a firing may be and still count as on time: catch_up
// skip runs a firing at most this late, and calls one later missed.
const Grace = time.Minute

// MaxCatchUp bounds catch_up run_all: at most this many of the missed
// firings run (the most recent); the older ones are recorded as skipped.
const MaxCatchUp = 100

// Schedule is one entry of one plugin, as the scheduler plans it.
type Schedule struct {
	Plugin string
	Entry  Entry
	// Start is when the service started: an after: entry counts from it.
	Start time.Time
	// MaxOutstandingPolls is the plugin's poll guard
	// (plugins.<name>.max_outstanding_polls); below 1 counts as 1.
	MaxOutstandingPolls int
	// Since is when the entry began to be applied as it is, zero when it
	// ran unchanged before (across a restart its missed firings are
	// caught up): a last firing before Since was made under another rule,
	// or before a gap in which the entry was not applied, so the entry
	// plans as a new one, with nothing missed.
	Since time.Time
}

// Stream returns the ledger stream of the schedule's firings,
// schedule/<plugin>/<id>.
func (s Schedule) Stream() string { return "schedule/" + s.Plugin + "/" + s.Entry.ID }

// Slot is one firing of a schedule, as schedule.fired and schedule.skipped
// record it. The scheduler's state is the Slot of the newest such event on
// the schedule's stream: Plan takes it as last.
type Slot struct {
	// Nominal is the time the schedule itself names (every, cron, at, or
	// start + after), after not_on and only_between.
	Nominal time.Time `json:"nominal"`
	// Due is when it runs: Nominal plus its jitter, moved into
	// preferred_window, never before the previous firing's Due.
	Due time.Time `json:"due"`
	// Start is the service start an after: firing counted from; zero for
	// the other kinds.
	Start time.Time `json:"start,omitzero"`
}

// Firing is a Slot with the reasons for its times, for people (ductile
// system scheduler) and logs.
type Firing struct {
	Slot
	Why []string
}

// Plan is what to do at one instant: the firings to run now, the due
// firings not to run, and the next firing after now.
type Plan struct {
	// Fire are due now, oldest first: one job each (if Decide agrees).
	Fire []Firing
	// Skip covers the due firings that do not run, all older than Fire;
	// nil when there are none.
	Skip *Skip
	// Next is the first firing after now; nil when there is none.
	Next *Firing
	// Done says why Next is nil.
	Done string
}

// Skip is a run of due firings that catch_up does not run, recorded as one
// schedule.skipped event with Last as its Slot.
type Skip struct {
	First, Last Slot
	// Count is how many; a lower bound when AtLeast (counting every firing
	// of a long gap is not worth its time).
	Count   int
	AtLeast bool
	Reason  string
}

// Nominal returns the entry's first nominal time after t, passing over the
// times not_on and only_between drop (why says which), or false when there
// is none: a one-shot at or before t, a rule with no time in ten years.
func (s Schedule) Nominal(t time.Time) (time.Time, []string, bool) {
	e := s.Entry
	switch e.Kind {
	case KindAt:
		return e.At.UTC(), nil, e.At.After(t)
	case KindAfter:
		n := s.Start.Add(e.After).UTC()
		return n, nil, n.After(t)
	case KindEvery, KindCron:
	default:
		return time.Time{}, nil, false
	}
	loc := e.location()
	from := t.UTC().Add(time.Nanosecond)
	limit := from.Add(horizon)
	days := e.allowedDays()
	only := windowSet(e.OnlyBetween)
	var why []string
	var notOnSaid, onlySaid bool
	for from.Before(limit) {
		n, ok := e.Rule.next(from, loc)
		if !ok || n.After(limit) {
			return time.Time{}, why, false
		}
		w := wallOf(n, loc)
		switch {
		case !days.has(w.Weekday()):
			if !notOnSaid {
				notOnSaid = true
				why = append(why, fmt.Sprintf("passed over %s (not_on %s)", local(n, loc), Weekdays[w.Weekday()]))
			}
			from, ok = firstInstant(n, loc, false, days.next)
		case len(only) > 0 && !only.contains(w.Sub(wallDay(w))):
			if !onlySaid {
				onlySaid = true
				why = append(why, fmt.Sprintf("passed over %s (outside only_between %s)", local(n, loc), FormatWindows(e.OnlyBetween)))
			}
			from, ok = only.enter(n, loc)
		default:
			return n, why, true
		}
		if !ok {
			return time.Time{}, why, false
		}
	}
	return time.Time{}, why, false
}

// Slot returns the firing at nominal: its due time is nominal plus the
// jitter of that firing, moved to the start of the next preferred_window
// when outside all of them (then the jitter only delays it), and kept
// inside the window (preferred_window, and only_between) that holds it.
func (s Schedule) Slot(nominal time.Time) Firing {
	e := s.Entry
	loc := e.location()
	n := nominal.UTC()
	f := Firing{Slot: Slot{Nominal: n}}
	if e.Kind == KindAfter {
		f.Start = s.Start.UTC()
	}
	offset := jitterOffset(s.Plugin, e.ID, n, e.Jitter)
	base := n
	preferred := windowSet(e.PreferredWindow)
	if len(preferred) > 0 && !preferred.contains(timeOfDay(n, loc)) {
		if start, ok := preferred.enter(n, loc); ok {
			base = start
			f.Why = append(f.Why, fmt.Sprintf("moved from %s to %s (preferred_window %s)", local(n, loc), local(base, loc), FormatWindows(e.PreferredWindow)))
			offset = max(offset, -offset)
		}
	}
	due := base.Add(offset)
	if offset != 0 {
		f.Why = append(f.Why, fmt.Sprintf("jitter %s (of ±%v)", signed(offset), e.Jitter/2))
	}
	// The windows holding base bound where the jitter may take it.
	allowed := preferred
	if only := windowSet(e.OnlyBetween); len(only) > 0 && only.contains(timeOfDay(base, loc)) {
		if allowed == nil {
			allowed = only
		} else {
			allowed = allowed.intersect(only)
		}
	}
	if offset != 0 && len(allowed) > 0 && !allowed.contains(timeOfDay(due, loc)) {
		if offset < 0 {
			due, _ = allowed.enter(due, loc) // at most base, which is inside
		} else if end, ok := allowed.leave(base, loc); ok {
			due = end.Add(-time.Millisecond)
			if due.Before(base) {
				due = base
			}
		}
		f.Why = append(f.Why, "jitter kept inside the window")
	}
	if e.Kind == KindAfter && due.Before(f.Start) {
		due = f.Start
	}
	f.Due = due
	return f
}

// cursor walks a schedule's firings in order of their nominal times.
type cursor struct {
	s     Schedule
	after time.Time // the next firing's nominal time is after this
	floor time.Time // and its due time is not before this
}

func (c *cursor) next() (Firing, bool) {
	n, why, ok := c.s.Nominal(c.after)
	if !ok {
		return Firing{}, false
	}
	f := c.s.Slot(n)
	f.Why = append(why, f.Why...)
	if f.Due.Before(c.floor) {
		f.Why = append(f.Why, fmt.Sprintf("held back from %s to the previous firing's due time", local(f.Due, c.s.Entry.location())))
		f.Due = c.floor
	}
	c.after, c.floor = n, f.Due
	return f, true
}

// Plan decides, at now, what the schedule does given last, the Slot of
// the newest schedule.fired or schedule.skipped event on its stream (nil
// when it has none). The firings after last whose due time has come are
// due; one more than Grace late was missed. catch_up decides which due
// firings run:
//
//   - skip: the latest, if it is on time; the rest are skipped;
//   - run_once: the latest, on time or not; the rest are skipped;
//   - run_all: each of them, up to the MaxCatchUp most recent.
//
// With no last, firings due more than Grace before now are not counted at
// all: they were before the schedule existed. An after: entry fires once
// per service start; an at: entry once for its time.
func (s Schedule) Plan(last *Slot, now time.Time) Plan {
	now = now.UTC()
	e := s.Entry
	e.CatchUp = e.catchUp()
	if e.Kind == KindAfter && last != nil && last.Start.Equal(s.Start) {
		return Plan{Done: s.done(last)}
	}
	keep := 2
	if e.CatchUp == CatchUpRunAll {
		keep = MaxCatchUp + 1
	}
	lateBefore := now.Add(-Grace)

	// A new entry, or one applied again or changed since its last firing,
	// has no history before it was applied: only what fell due within
	// Grace may run, the latest of it.
	fresh := !e.Kind.OneShot() && (last == nil || last.Due.Before(s.Since))
	var w walk
	var first *Firing
	switch {
	case fresh:
		c := cursor{s: s, after: lateBefore.Add(-e.Jitter/2 - time.Nanosecond)}
		if last != nil && last.Nominal.After(c.after) {
			c.after, c.floor = last.Nominal, last.Due
		}
		w = s.walk(c, now, keep, func(f Firing) bool { return !f.Due.Before(lateBefore) }, maxWalk)
	case last == nil:
		w = s.walk(cursor{s: s}, now, keep, nil, maxWalk)
	default:
		start := cursor{s: s, after: last.Nominal, floor: last.Due}
		w = s.walk(start, now, keep, nil, exactWalk)
		// A long gap holds too many firings to walk: look back from now
		// until enough due firings are found, or last is reached.
		for span := time.Hour; !w.complete; span *= 8 {
			c := start
			reached := span >= now.Sub(last.Nominal) || span > horizon
			if !reached {
				c.after = now.Add(-span)
			}
			w = s.walk(c, now, keep, nil, maxWalk)
			w.atLeast = true
			if reached || w.count >= keep || !w.complete {
				break
			}
		}
		if f, ok := start.next(); ok && !f.Due.After(now) {
			first = &f
		}
	}

	p := Plan{Next: w.next}
	if p.Next == nil {
		p.Done = s.done(last)
	}
	if w.count == 0 {
		return p
	}
	latest := w.due[len(w.due)-1]
	late := latest.Due.Before(lateBefore)
	if fresh {
		// Of the firings due within the last Grace, the latest runs,
		// whatever catch_up says, and the others are not its history to
		// record.
		p.Fire = w.due[len(w.due)-1:]
		return p
	}
	switch e.CatchUp {
	case CatchUpRunAll:
		p.Fire = w.due[max(0, len(w.due)-MaxCatchUp):]
	case CatchUpRunOnce:
		p.Fire = w.due[len(w.due)-1:]
	default:
		if !late {
			p.Fire = w.due[len(w.due)-1:]
		}
	}
	for i := range p.Fire {
		f := &p.Fire[i]
		if lateness := now.Sub(f.Due); lateness >= Grace {
			f.Why = append(f.Why, fmt.Sprintf("%s late (catch_up %s)", lateness.Round(time.Second), e.CatchUp))
		}
	}
	skipped := w.count - len(p.Fire)
	if skipped <= 0 {
		return p
	}
	skip := &Skip{Last: w.due[len(w.due)-len(p.Fire)-1].Slot, Count: skipped, AtLeast: w.atLeast}
	skip.First = w.first.Slot
	if first != nil {
		skip.First = first.Slot
	}
	count := func(what string) string {
		text := fmt.Sprintf("%d %s firing", skipped, what)
		if skipped > 1 {
			text += "s"
		}
		if skip.AtLeast {
			text = "at least " + text
		}
		return text
	}
	switch coalesced := !skip.First.Due.Before(lateBefore); {
	case e.CatchUp == CatchUpRunAll:
		skip.Reason = fmt.Sprintf("%s beyond the %d most recent (catch_up run_all runs at most %d)", count("missed"), MaxCatchUp, MaxCatchUp)
	case coalesced:
		skip.Reason = fmt.Sprintf("%s due together with it (catch_up %s runs only the latest)", count("earlier"), e.CatchUp)
	case e.CatchUp == CatchUpRunOnce:
		skip.Reason = fmt.Sprintf("%s, replaced by one run now (catch_up run_once)", count("missed"))
	case len(p.Fire) > 0:
		skip.Reason = fmt.Sprintf("%s (catch_up skip runs only the latest, which is on time)", count("missed"))
	default:
		skip.Reason = fmt.Sprintf("%s, the latest due %s ago, more than %v late (catch_up skip)", count("missed"), now.Sub(latest.Due).Round(time.Second), Grace)
	}
	p.Skip = skip
	return p
}

// walk is the due firings found by Schedule.walk.
type walk struct {
	due     []Firing // the last few due, oldest first
	first   Firing   // the first due
	count   int      // how many were due
	next    *Firing  // the first not yet due
	atLeast bool
	// complete: the walk reached a firing after now (or the end of the
	// schedule) before its limit.
	complete bool
}

// Limits of one walk. exactWalk: Plan counts the firings since the last
// one exactly up to this many. maxWalk: no schedule of at least 1s comes
// near it in the spans Plan looks back over.
const (
	exactWalk = 10_000
	maxWalk   = 1 << 20
)

// walk follows c to the first firing due after now, at most limit firings,
// keeping the last keep of those due by then; counts (when not nil) says
// which firings count.
func (s Schedule) walk(c cursor, now time.Time, keep int, counts func(Firing) bool, limit int) walk {
	var w walk
	for range limit {
		f, ok := c.next()
		if !ok {
			w.complete = true
			return w
		}
		if f.Due.After(now) {
			w.next, w.complete = &f, true
			return w
		}
		if counts != nil && !counts(f) {
			continue
		}
		if w.count == 0 {
			w.first = f
		}
		w.count++
		if len(w.due) == keep {
			copy(w.due, w.due[1:])
			w.due = w.due[:keep-1]
		}
		w.due = append(w.due, f)
	}
	return w
}

// done says why a schedule has no next firing.
func (s Schedule) done(last *Slot) string {
	e := s.Entry
	switch e.Kind {
	case KindAt:
		if last != nil && last.Nominal.After(e.At) {
			return fmt.Sprintf("at %s: a one-shot whose time is before the newest firing recorded (%s)", e.At.Format(time.RFC3339), last.Nominal.Format(time.RFC3339))
		}
		return fmt.Sprintf("at %s: a one-shot, nothing after it", e.At.Format(time.RFC3339))
	case KindAfter:
		return fmt.Sprintf("after %v: once per service start (this one at %s)", e.After, local(s.Start, e.location()))
	}
	return fmt.Sprintf("%s: no firing in the next %d years", e.When(), horizon/(366*day))
}

// signed writes d with its sign: "+1m30s", "-250ms".
func signed(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

// timeOfDay returns the time of day loc's clock reads at t.
func timeOfDay(t time.Time, loc *time.Location) time.Duration {
	w := wallOf(t, loc)
	return w.Sub(wallDay(w))
}

// local writes t as loc's clock reads it, with the zone's abbreviation.
func local(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05.999 MST")
}

// FormatWindows writes windows as config show does: "08:00-22:00", or a
// list "[08:00-09:00, 17:00-18:00]".
func FormatWindows(ws []Window) string {
	texts := make([]string, len(ws))
	for i, w := range ws {
		texts[i] = w.String()
	}
	if len(texts) == 1 {
		return texts[0]
	}
	return "[" + strings.Join(texts, ", ") + "]"
}
