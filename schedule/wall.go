package schedule

import (
	"time"

	_ "time/tzdata" // every IANA zone resolves, even on a machine without /usr/share/zoneinfo
)

// A wall time is a reading of a clock in some zone, held as a time.Time in
// UTC: 09:30 in Berlin is the wall time 09:30 UTC. Wall times are compared
// and stepped like instants, but they name clock readings, which across a
// DST change may happen never or twice.

const day = 24 * time.Hour

// horizon bounds every search for a next time: a schedule with no firing
// within it has none (cron's February 30th).
const horizon = 10 * 366 * day

// zoneAt returns the span [start, end) of the offset loc has at t, and that
// offset. A zero start or end means the offset held forever in that
// direction.
func zoneAt(t time.Time, loc *time.Location) (start, end time.Time, offset time.Duration) {
	lt := t.In(loc)
	_, secs := lt.Zone()
	start, end = lt.ZoneBounds()
	return start.UTC(), end.UTC(), time.Duration(secs) * time.Second
}

// wallOf returns the reading of loc's clock at t.
func wallOf(t time.Time, loc *time.Location) time.Time {
	_, secs := t.In(loc).Zone()
	return t.UTC().Add(time.Duration(secs) * time.Second)
}

// wallDay returns the midnight that starts w's day.
func wallDay(w time.Time) time.Time {
	return w.Truncate(day)
}

// nextWallFunc returns the first wall time ≥ from that something matches,
// or false when there is none before limit.
type nextWallFunc func(from, limit time.Time) (time.Time, bool)

// firstInstant returns the first instant ≥ t at which loc's clock reads a
// wall time that next matches. Across a DST change it does what cron does
// (cron(8): "Only jobs that run at a particular time (not specified as
// @hourly, nor with '*' in the hour or minute specifier) are affected"):
//
//   - fixed (a particular time): a time the clocks skip fires at the first
//     instant after the jump; a time the clocks repeat fires once, the first
//     time round;
//   - otherwise (a wildcard, and every search for a window or a day): a
//     skipped time does not happen, and a repeated time happens twice.
func firstInstant(t time.Time, loc *time.Location, fixed bool, next nextWallFunc) (time.Time, bool) {
	t = t.UTC()
	start, end, off := zoneAt(t, loc)
	from := t.Add(off)
	limit := from.Add(horizon)
	if fixed && !start.IsZero() {
		_, _, prev := zoneAt(start.Add(-time.Nanosecond), loc)
		switch before := start.Add(prev); {
		case prev > off && from.Before(before):
			// Inside the hour the clocks repeat: its times have had their turn.
			from = before
		case prev < off && t.Equal(start):
			// At the end of a jump: a time the clocks skipped fires now.
			if m, ok := next(before, limit); ok && m.Before(from) {
				return t, true
			}
		}
	}
	for range 256 {
		m, ok := next(from, limit)
		if !ok {
			return time.Time{}, false
		}
		if at := m.Add(-off); end.IsZero() || at.Before(end) {
			return at, true
		}
		// m lies past this offset's end: cross the change.
		_, nextEnd, nextOff := zoneAt(end, loc)
		after := end.Add(nextOff)
		switch {
		case nextOff > off && m.Before(after): // m is a time the clocks skip
			if fixed {
				return end, true
			}
			from = after
		case nextOff < off && !fixed: // the clocks go back: times from after repeat
			from = after
		default:
			from = m
		}
		end, off = nextEnd, nextOff
	}
	return time.Time{}, false
}

// clockSet is a set of times of day: sorted, disjoint spans [start, end)
// within [0, 24h).
type clockSet []span

type span struct{ start, end time.Duration }

// windowSet returns the times of day that any of windows allows.
func windowSet(windows []Window) clockSet {
	var set clockSet
	for _, w := range windows {
		if w.Start < w.End {
			set = set.union(clockSet{{w.Start, w.End}})
		} else {
			set = set.union(clockSet{{0, w.End}, {w.Start, day}})
		}
	}
	return set
}

func (s clockSet) contains(tod time.Duration) bool {
	for _, sp := range s {
		if tod >= sp.start && tod < sp.end {
			return true
		}
	}
	return false
}

// union returns the times of day in s or o.
func (s clockSet) union(o clockSet) clockSet {
	all := append(append(clockSet{}, s...), o...)
	for i := 1; i < len(all); i++ { // insertion sort: a handful of spans
		for j := i; j > 0 && all[j].start < all[j-1].start; j-- {
			all[j], all[j-1] = all[j-1], all[j]
		}
	}
	var out clockSet
	for _, sp := range all {
		if sp.start >= sp.end {
			continue
		}
		if n := len(out); n > 0 && sp.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// intersect returns the times of day in both s and o.
func (s clockSet) intersect(o clockSet) clockSet {
	var out clockSet
	for _, a := range s {
		for _, b := range o {
			if lo, hi := max(a.start, b.start), min(a.end, b.end); lo < hi {
				out = append(out, span{lo, hi})
			}
		}
	}
	return clockSet{}.union(out)
}

// complement returns the times of day not in s.
func (s clockSet) complement() clockSet {
	var out clockSet
	at := time.Duration(0)
	for _, sp := range s {
		if sp.start > at {
			out = append(out, span{at, sp.start})
		}
		at = sp.end
	}
	if at < day {
		out = append(out, span{at, day})
	}
	return out
}

// next is a nextWallFunc matching the wall times whose time of day is in s.
func (s clockSet) next(from, limit time.Time) (time.Time, bool) {
	if len(s) == 0 {
		return time.Time{}, false
	}
	midnight := wallDay(from)
	tod := from.Sub(midnight)
	for _, sp := range s {
		switch {
		case tod >= sp.start && tod < sp.end:
			return from, true
		case tod < sp.start:
			w := midnight.Add(sp.start)
			return w, !w.After(limit)
		}
	}
	w := midnight.Add(day + s[0].start)
	return w, !w.After(limit)
}

// enter returns the first instant ≥ t at which loc's clock reads a time of
// day in s.
func (s clockSet) enter(t time.Time, loc *time.Location) (time.Time, bool) {
	return firstInstant(t, loc, false, s.next)
}

// leave returns the first instant ≥ t at which loc's clock reads a time of
// day outside s; false when s is the whole day.
func (s clockSet) leave(t time.Time, loc *time.Location) (time.Time, bool) {
	return s.complement().enter(t, loc)
}

// weekdaySet is a set of weekdays, bit d for time.Weekday(d).
type weekdaySet uint8

func (s weekdaySet) has(d time.Weekday) bool { return s&(1<<d) != 0 }

// next is a nextWallFunc matching the wall times on a day in s.
func (s weekdaySet) next(from, limit time.Time) (time.Time, bool) {
	if s == 0 {
		return time.Time{}, false
	}
	if s.has(from.Weekday()) {
		return from, true
	}
	w := wallDay(from)
	for range 7 {
		w = w.Add(day)
		if s.has(w.Weekday()) {
			break
		}
	}
	return w, !w.After(limit)
}
