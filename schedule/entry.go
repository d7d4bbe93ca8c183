package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Entry is one item of plugins.<name>.schedules, validated: config builds
// it, the scheduler plans it. Read-only once built.
type Entry struct {
	// ID names the entry within its plugin (default "default"); the
	// scheduler's stream is schedule/<plugin>/<id>.
	ID string
	// Command is the plugin command each firing enqueues (default poll).
	Command string
	// Payload is handed to the job as its event payload; nil when none.
	Payload map[string]any

	// Kind says which of Rule, At and After is set.
	Kind Kind
	// Rule is when an every: or cron: entry fires.
	Rule Rule
	// At is when an at: one-shot fires.
	At time.Time
	// After is how long after the service starts an after: one-shot fires.
	After time.Duration

	// Jitter spreads each firing by a stable offset in [-Jitter/2,
	// +Jitter/2] (see Schedule.Slot); 0 for none.
	Jitter time.Duration
	// OnlyBetween, when set, drops the nominal times whose time of day is
	// in none of its windows.
	OnlyBetween []Window
	// PreferredWindow, when set, moves a firing due outside all of its
	// windows to the start of the next one.
	PreferredWindow []Window
	// NotOn drops the nominal times on these days.
	NotOn []time.Weekday
	// Timezone is the zone's name as written, or "Local" (the default: the
	// daemon's zone); Location is that zone, nil meaning UTC.
	Timezone string
	Location *time.Location

	CatchUp   CatchUp
	IfRunning IfRunning
}

// Defaults of an entry's keys.
const (
	DefaultID       = "default"
	DefaultCommand  = PollCommand
	DefaultTimezone = "Local"
)

// PollCommand is the command the poll guard watches.
const PollCommand = "poll"

// Kind is how an entry says when it fires.
type Kind string

// The kinds, named as their config keys.
const (
	KindEvery Kind = "every"
	KindCron  Kind = "cron"
	KindAt    Kind = "at"
	KindAfter Kind = "after"
)

// Kinds are the keys of which an entry sets exactly one.
var Kinds = []Kind{KindEvery, KindCron, KindAt, KindAfter}

// OneShot reports whether the kind fires once (at, after).
func (k Kind) OneShot() bool { return k == KindAt || k == KindAfter }

// CatchUp is what happens to firings that are due together or were
// missed (see Schedule.Plan).
type CatchUp string

// The catch_up values; CatchUpSkip is the default.
const (
	CatchUpSkip    CatchUp = "skip"
	CatchUpRunOnce CatchUp = "run_once"
	CatchUpRunAll  CatchUp = "run_all"
)

// CatchUps are the valid catch_up values.
var CatchUps = []string{string(CatchUpSkip), string(CatchUpRunOnce), string(CatchUpRunAll)}

// IfRunning is what a due firing does while a job of its entry is still
// queued or running (see Schedule.Decide).
type IfRunning string

// The if_running values; IfRunningSkip is the default.
const (
	IfRunningSkip   IfRunning = "skip"
	IfRunningQueue  IfRunning = "queue"
	IfRunningCancel IfRunning = "cancel"
)

// IfRunnings are the valid if_running values.
var IfRunnings = []string{string(IfRunningSkip), string(IfRunningQueue), string(IfRunningCancel)}

// Window is a time of day span, "HH:MM-HH:MM", start included, end not.
// An end before the start runs across midnight: 22:00-06:00.
type Window struct {
	Start, End time.Duration // since midnight; End may be 24h
}

// ParseWindow parses "HH:MM-HH:MM" (the end may be 24:00).
func ParseWindow(s string) (Window, error) {
	bad := func(why string) (Window, error) {
		return Window{}, fmt.Errorf("invalid window %q: %s", s, why)
	}
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return bad(`write "HH:MM-HH:MM", e.g. "08:00-22:00" (across midnight: "22:00-06:00")`)
	}
	start, err := parseClock(strings.TrimSpace(a), false)
	if err != nil {
		return bad(err.Error())
	}
	end, err := parseClock(strings.TrimSpace(b), true)
	if err != nil {
		return bad(err.Error())
	}
	if start == end || start == 0 && end == day {
		return bad("it starts where it ends: to allow the whole day, leave the key out")
	}
	return Window{Start: start, End: end}, nil
}

// parseClock reads "HH:MM" (H:MM too); 24:00 only when allow24.
func parseClock(s string, allow24 bool) (time.Duration, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return 0, fmt.Errorf("%q is not a time like 08:00", s)
	}
	hour, _ := strconv.Atoi(h)
	minute, _ := strconv.Atoi(m)
	switch {
	case hour == 24 && minute == 0 && allow24:
		return day, nil
	case hour > 23 || minute > 59:
		return 0, fmt.Errorf("%q is not a time of day (00:00 to 23:59%s)", s, map[bool]string{true: ", or 24:00 as an end"}[allow24])
	}
	return time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute, nil
}

func digits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

// String returns "HH:MM-HH:MM".
func (w Window) String() string {
	clock := func(d time.Duration) string {
		return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return clock(w.Start) + "-" + clock(w.End)
}

// Weekdays are the day names not_on takes, Sunday first (0).
var Weekdays = []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

// ParseWeekday reads a day name (any case; three letters are enough:
// "sat") or its number, 0 (Sunday) to 6.
func ParseWeekday(s string) (time.Weekday, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 6 {
			return 0, fmt.Errorf("day %d is out of range: use 0 (Sunday) to 6 (Saturday)", n)
		}
		return time.Weekday(n), nil
	}
	lower := strings.ToLower(s)
	for i, name := range Weekdays {
		if lower == name || len(lower) == 3 && strings.HasPrefix(name, lower) {
			return time.Weekday(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a day: use a day name (saturday, or sat) or 0 (Sunday) to 6", s)
}

// location returns the entry's zone, UTC when unset.
func (e Entry) location() *time.Location {
	if e.Location == nil {
		return time.UTC
	}
	return e.Location
}

// allowedDays returns the days the entry may fire on.
func (e Entry) allowedDays() weekdaySet {
	set := weekdaySet(0x7f)
	for _, d := range e.NotOn {
		set &^= 1 << d
	}
	return set
}

// catchUp returns the entry's catch_up, skip when unset.
func (e Entry) catchUp() CatchUp {
	if e.CatchUp == "" {
		return CatchUpSkip
	}
	return e.CatchUp
}

// When describes the entry's timing as written: "every 5m", "cron 0 9 * *
// 1-5", "at 2026-12-01T09:00:00Z", "after 10m".
func (e Entry) When() string {
	switch e.Kind {
	case KindEvery, KindCron:
		return string(e.Kind) + " " + e.Rule.String()
	case KindAt:
		return "at " + e.At.Format(time.RFC3339Nano)
	case KindAfter:
		return "after " + e.After.String()
	}
	return "never"
}
