package schedule

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Rule is when a recurring entry fires: an every: interval or a cron:
// expression. Build one with ParseEvery or ParseCron.
type Rule struct {
	text string
	kind ruleKind
	// every is the interval of an every: rule (hourly is 1h, daily 24h);
	// 0 for weekly, monthly and cron.
	every time.Duration
	// fixed: the rule fires at particular times of day, which matters
	// across a DST change (see firstInstant).
	fixed bool

	// cron fields, as robfig/cron's parser sets them: bit n for value n.
	minute, hour, dom, month, dow uint64
	// domStar and dowStar: the field was * (or ?); cron then requires
	// both day fields to match, else either.
	domStar, dowStar bool
}

type ruleKind uint8

const (
	// ruleClock: every D that divides a day, at local midnight + k·D.
	ruleClock ruleKind = iota + 1
	// ruleDays: every N days, at local midnight, counting days from
	// 1970-01-01.
	ruleDays
	// ruleElapsed: every D that neither divides a day nor is whole days, at
	// k·D after 1970-01-01T00:00Z, whatever the clocks say.
	ruleElapsed
	// ruleCron: cron fields (also weekly and monthly).
	ruleCron
)

// MinEvery and MaxEvery bound an every: interval (a longer wait is an
// at: one-shot).
const (
	MinEvery = time.Second
	MaxEvery = 1830 * day
)

// EveryNames are the names every: takes besides durations, as cron's
// @hourly, @daily, @weekly (Sunday) and @monthly (the 1st) mean them.
var EveryNames = []string{"hourly", "daily", "weekly", "monthly"}

// ParseEvery parses an every: value: hourly, daily, weekly, monthly, a Go
// duration of at least 1s (5m, 90s, 2h30m), or whole days first (2d, 1d12h).
func ParseEvery(s string) (Rule, error) {
	switch s {
	case "hourly":
		return Rule{text: s, kind: ruleClock, every: time.Hour}, nil
	case "daily":
		return Rule{text: s, kind: ruleClock, every: day, fixed: true}, nil
	case "weekly", "monthly":
		expr := map[string]string{"weekly": "0 0 * * 0", "monthly": "0 0 1 * *"}[s]
		r, err := ParseCron(expr)
		if err != nil {
			return Rule{}, err
		}
		r.text = s
		return r, nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return Rule{}, fmt.Errorf("invalid interval %q: use a duration like 90s, 15m or 2h (at least 1s), whole days like 2d, or one of %s", s, strings.Join(EveryNames, ", "))
	}
	if d < MinEvery {
		return Rule{}, fmt.Errorf("interval %s is shorter than the minimum of 1s", s)
	}
	if d > MaxEvery {
		return Rule{}, fmt.Errorf("interval %s is longer than the maximum of 1830d (5 years): for one run at a given time use at:", s)
	}
	r := Rule{text: s, every: d}
	switch {
	case day%d == 0:
		r.kind, r.fixed = ruleClock, d == day
	case d%day == 0:
		r.kind, r.fixed = ruleDays, true
	default:
		r.kind = ruleElapsed
	}
	return r, nil
}

// ParseDuration reads a duration as the config writes one: a Go duration
// ("90s", "2h30m") or a leading whole number of days ("30d", "1d12h"). Go
// durations have no "d" unit, so a "d" always means days.
func ParseDuration(s string) (time.Duration, error) {
	i := strings.IndexByte(s, 'd')
	if i <= 0 || strings.TrimLeft(s[:i], "0123456789") != "" {
		return time.ParseDuration(s)
	}
	days, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || days > math.MaxInt64/int64(day) {
		return 0, errors.New("too many days")
	}
	total := time.Duration(days) * day
	if rest := s[i+1:]; rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, err
		}
		if d < 0 || total > math.MaxInt64-d {
			return 0, errors.New("out of range")
		}
		total += d
	}
	return total, nil
}

// cronParser reads the five standard fields; no seconds, no @descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// cronReference is where ParseCron looks for a first match: eight years
// from 2000 hold every day of month of every month, February 29th too.
var cronReference = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ParseCron parses a standard 5-field cron expression (minute hour
// day-of-month month day-of-week; names like jan and mon allowed) with
// robfig/cron's parser, and refuses one that can never match (February
// 30th). Only the parser is used: firing times are computed here, with
// cron's own DST rules.
func ParseCron(s string) (Rule, error) {
	fields := strings.Fields(s)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "TZ=") || strings.HasPrefix(fields[0], "CRON_TZ=")) {
		return Rule{}, fmt.Errorf("invalid cron %q: a time zone prefix is not read here: set timezone: instead", s)
	}
	if len(fields) > 0 && strings.HasPrefix(fields[0], "@") {
		return Rule{}, fmt.Errorf("invalid cron %q: write 5 fields; for @hourly, @daily, @weekly or @monthly use every: hourly (daily, …)", s)
	}
	if len(fields) != 5 {
		return Rule{}, fmt.Errorf("invalid cron %q: need 5 fields (minute hour day-of-month month day-of-week), found %d, e.g. \"30 9 * * 1-5\"", s, len(fields))
	}
	parsed, err := cronParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return Rule{}, fmt.Errorf("invalid cron %q: %v (fields: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-6 with 0 Sunday)", s, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return Rule{}, fmt.Errorf("invalid cron %q: not a 5-field expression", s)
	}
	const starBit = 1 << 63 // robfig/cron marks a * field with it
	star := func(f string) bool { return strings.HasPrefix(f, "*") || strings.HasPrefix(f, "?") }
	r := Rule{
		text:    s,
		kind:    ruleCron,
		minute:  spec.Minute &^ starBit,
		hour:    spec.Hour &^ starBit,
		dom:     spec.Dom &^ starBit,
		month:   spec.Month &^ starBit,
		dow:     spec.Dow &^ starBit,
		domStar: star(fields[2]),
		dowStar: star(fields[4]),
		// cron(8): a job with '*' in the hour or minute field is not a
		// particular time, and is not moved across a DST change.
		fixed: !strings.HasPrefix(fields[0], "*") && !strings.HasPrefix(fields[1], "*"),
	}
	if _, ok := r.nextWall(cronReference, cronReference.AddDate(8, 0, 0)); !ok {
		return Rule{}, fmt.Errorf("invalid cron %q: it never matches a date (like February 30th)", s)
	}
	return r, nil
}

// String returns the rule as written: "5m", "hourly", "0 9 * * 1-5".
func (r Rule) String() string { return r.text }

// IsCron reports whether the rule came from cron: rather than every:.
func (r Rule) IsCron() bool { return r.kind == ruleCron && !slices.Contains(EveryNames, r.text) }

// Every returns the interval of an every: rule given as a duration (hourly
// is 1h, daily 24h); 0 for weekly, monthly and cron, whose gaps vary.
func (r Rule) Every() time.Duration { return r.every }

// next returns the first instant ≥ t at which r fires in loc.
func (r Rule) next(t time.Time, loc *time.Location) (time.Time, bool) {
	if r.kind == ruleElapsed {
		n := t.UnixNano()
		d := int64(r.every)
		k := n / d
		if k*d < n {
			k++
		}
		return time.Unix(0, k*d).UTC(), true
	}
	return firstInstant(t, loc, r.fixed, r.nextWall)
}

// nextWall returns the first wall time ≥ from that r matches.
func (r Rule) nextWall(from, limit time.Time) (time.Time, bool) {
	midnight := wallDay(from)
	switch r.kind {
	case ruleClock:
		tod := from.Sub(midnight)
		w := midnight.Add((tod + r.every - 1) / r.every * r.every)
		return w, !w.After(limit)
	case ruleDays:
		if midnight.Before(from) {
			midnight = midnight.Add(day)
		}
		n := int64(r.every / day)
		if rem := floorMod(midnight.Unix()/int64(day/time.Second), n); rem != 0 {
			midnight = midnight.Add(time.Duration(n-rem) * day)
		}
		return midnight, !midnight.After(limit)
	case ruleCron:
		return r.nextCron(from, limit)
	}
	return time.Time{}, false
}

func floorMod(a, n int64) int64 {
	m := a % n
	if m < 0 {
		m += n
	}
	return m
}

// nextCron returns the first wall time ≥ from that the cron fields match.
func (r Rule) nextCron(from, limit time.Time) (time.Time, bool) {
	midnight := wallDay(from)
	// The first whole minute at or after from.
	minute := int((from.Sub(midnight) + time.Minute - 1) / time.Minute)
	for !midnight.After(limit) {
		if r.dayMatches(midnight) {
			for h := minute / 60; h < 24; h++ {
				if r.hour&(1<<h) == 0 {
					continue
				}
				low := 0
				if h == minute/60 {
					low = minute % 60
				}
				if m := r.minute >> low << low; m != 0 {
					w := midnight.Add(time.Duration(h)*time.Hour + time.Duration(bits.TrailingZeros64(m))*time.Minute)
					return w, !w.After(limit)
				}
			}
		}
		midnight = midnight.Add(day)
		minute = 0
	}
	return time.Time{}, false
}

// dayMatches applies cron's day rule: month, and day of month and day of
// week both when either is *, else either.
func (r Rule) dayMatches(midnight time.Time) bool {
	if r.month&(1<<uint(midnight.Month())) == 0 {
		return false
	}
	dom := r.dom&(1<<uint(midnight.Day())) != 0
	dow := r.dow&(1<<uint(midnight.Weekday())) != 0
	if r.domStar || r.dowStar {
		return dom && dow
	}
	return dom || dow
}
