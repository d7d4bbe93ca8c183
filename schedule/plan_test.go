package schedule_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/schedule"
)

func windows(t *testing.T, specs ...string) []schedule.Window {
	t.Helper()
	var out []schedule.Window
	for _, s := range specs {
		w, err := schedule.ParseWindow(s)
		require.NoError(t, err)
		out = append(out, w)
	}
	return out
}

func utc(y int, m time.Month, d, h, min, s int) time.Time {
	return time.Date(y, m, d, h, min, s, 0, time.UTC)
}

func TestNotOn(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindCron, Rule: cronRule(t, "0 9 * * *"),
		Location: berlin, NotOn: []time.Weekday{time.Saturday, time.Sunday}}}
	friday := time.Date(2026, 11, 20, 10, 0, 0, 0, berlin)
	require.Equal(t, []string{"2026-11-23 09:00:00 +0100", "2026-11-24 09:00:00 +0100"}, inZone(nominals(t, s, friday, 2), berlin))
	_, why, _ := s.Nominal(friday)
	require.Equal(t, []string{"passed over 2026-11-21 09:00:00 CET (not_on saturday)"}, why)

	// The day is the entry's zone's: 23:30 UTC on a Friday is Saturday in Berlin.
	s.Entry = schedule.Entry{Kind: schedule.KindEvery, Rule: every(t, "30m"), Location: berlin, NotOn: []time.Weekday{time.Saturday}}
	n, _, _ := s.Nominal(utc(2026, 11, 20, 22, 50, 0)) // 23:50 Friday in Berlin
	require.Equal(t, "2026-11-22 00:00:00 +0100", n.In(berlin).Format("2006-01-02 15:04:05 -0700"))

	// Every day excluded: never.
	s.Entry.NotOn = []time.Weekday{0, 1, 2, 3, 4, 5, 6}
	_, _, ok := s.Nominal(friday)
	require.False(t, ok)
}

func TestOnlyBetween(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	for _, tc := range []struct {
		name    string
		rule    schedule.Rule
		windows []string
		from    time.Time
		want    []string
	}{
		{"across midnight", every(t, "hourly"), []string{"22:00-02:00"}, time.Date(2026, 11, 18, 12, 0, 0, 0, berlin),
			[]string{"2026-11-18 22:00:00 +0100", "2026-11-18 23:00:00 +0100", "2026-11-19 00:00:00 +0100", "2026-11-19 01:00:00 +0100", "2026-11-19 22:00:00 +0100"}},
		{"a list, end excluded", every(t, "30m"), []string{"08:00-09:00", "17:00-18:00"}, time.Date(2026, 11, 18, 12, 0, 0, 0, berlin),
			[]string{"2026-11-18 17:00:00 +0100", "2026-11-18 17:30:00 +0100", "2026-11-19 08:00:00 +0100", "2026-11-19 08:30:00 +0100"}},
		{"spring forward: the window loses its skipped hour", every(t, "30m"), []string{"01:00-03:00"}, time.Date(2026, 3, 29, 0, 0, 0, 0, berlin),
			[]string{"2026-03-29 01:00:00 +0100", "2026-03-29 01:30:00 +0100", "2026-03-30 01:00:00 +0200"}},
		{"fall back: the repeated hour is inside twice", every(t, "30m"), []string{"02:00-03:00"}, time.Date(2026, 10, 25, 0, 0, 0, 0, berlin),
			[]string{"2026-10-25 02:00:00 +0200", "2026-10-25 02:30:00 +0200", "2026-10-25 02:00:00 +0100", "2026-10-25 02:30:00 +0100", "2026-10-26 02:00:00 +0100"}},
		{"with not_on across midnight", cronRule(t, "0 23,1 * * *"), []string{"22:00-02:00"}, time.Date(2026, 11, 20, 12, 0, 0, 0, berlin),
			// not_on saturday: Friday 23:00 runs, Saturday 01:00 and 23:00 do not.
			[]string{"2026-11-20 23:00:00 +0100", "2026-11-22 01:00:00 +0100", "2026-11-22 23:00:00 +0100"}},
	} {
		e := schedule.Entry{Kind: schedule.KindEvery, Rule: tc.rule, Location: berlin, OnlyBetween: windows(t, tc.windows...)}
		if tc.rule.IsCron() {
			e.Kind, e.NotOn = schedule.KindCron, []time.Weekday{time.Saturday}
		}
		s := schedule.Schedule{Entry: e}
		require.Equal(t, tc.want, inZone(nominals(t, s, tc.from, len(tc.want)), berlin), tc.name)
	}
	s := schedule.Schedule{Entry: schedule.Entry{Kind: schedule.KindEvery, Rule: every(t, "hourly"), Location: berlin, OnlyBetween: windows(t, "22:00-02:00")}}
	_, why, _ := s.Nominal(time.Date(2026, 11, 18, 12, 0, 0, 0, berlin))
	require.Equal(t, []string{"passed over 2026-11-18 13:00:00 CET (outside only_between 22:00-02:00)"}, why)

	// No time of the rule in the window: never.
	s.Entry = schedule.Entry{Kind: schedule.KindCron, Rule: cronRule(t, "0 3 * * *"), Location: berlin, OnlyBetween: windows(t, "08:00-09:00")}
	_, _, ok := s.Nominal(time.Date(2026, 11, 18, 12, 0, 0, 0, berlin))
	require.False(t, ok)
}

// TestJitter: the offset of a firing is a function of (plugin, schedule
// id, nominal time) alone: the same on every call and after a restart,
// within [-jitter/2, +jitter/2] in whole milliseconds, spread evenly.
func TestJitter(t *testing.T) {
	t.Parallel()
	entry := schedule.Entry{ID: "default", Kind: schedule.KindEvery, Rule: every(t, "1m"), Jitter: 10 * time.Minute}
	s := schedule.Schedule{Plugin: "echo", Entry: entry}
	restarted := schedule.Schedule{Plugin: "echo", Entry: entry, Start: utc(2027, 1, 1, 0, 0, 0)}
	other := schedule.Schedule{Plugin: "echo", Entry: schedule.Entry{ID: "nightly", Kind: schedule.KindEvery, Rule: every(t, "1m"), Jitter: 10 * time.Minute}}
	otherPlugin := schedule.Schedule{Plugin: "mail", Entry: entry}

	const n, buckets = 20000, 20
	counts := make([]int, buckets)
	var sum time.Duration
	sameAsOther, sameAsOtherPlugin := 0, 0
	from := utc(2026, 11, 18, 0, 0, 0)
	for i := range n {
		nominal := from.Add(time.Duration(i) * time.Minute)
		f := s.Slot(nominal)
		offset := f.Due.Sub(nominal)
		require.Equal(t, nominal, f.Nominal)
		require.LessOrEqual(t, offset, 5*time.Minute)
		require.GreaterOrEqual(t, offset, -5*time.Minute)
		require.Zero(t, offset%time.Millisecond)
		require.Equal(t, f, s.Slot(nominal), "the same firing, asked again")
		require.Equal(t, f, restarted.Slot(nominal), "the same firing, after a restart")
		if other.Slot(nominal).Due.Equal(f.Due) {
			sameAsOther++
		}
		if otherPlugin.Slot(nominal).Due.Equal(f.Due) {
			sameAsOtherPlugin++
		}
		counts[int((offset+5*time.Minute)*buckets/(10*time.Minute+time.Millisecond))]++
		sum += offset
	}
	// Each of 20 equal buckets holds 1000 ± a few percent; the mean is near 0.
	for i, c := range counts {
		require.InDelta(t, n/buckets, c, 0.12*n/buckets, "bucket %d of %v", i, counts)
	}
	require.Less(t, (sum / n).Abs(), 10*time.Second)
	// Other schedules get other offsets (a collision is one in 600 001).
	require.Less(t, sameAsOther, 5)
	require.Less(t, sameAsOtherPlugin, 5)

	// The hash is part of the contract: a new version that changed it
	// would move every jittered firing of every schedule on upgrade.
	f := s.Slot(utc(2026, 11, 18, 10, 0, 0))
	require.Equal(t, "2026-11-18T09:59:45.19Z", f.Due.Format(time.RFC3339Nano))
	require.Equal(t, []string{"jitter -14.81s (of ±5m0s)"}, f.Why)

	// No jitter, or less than 2ms of it: due at the nominal time.
	for _, j := range []time.Duration{0, time.Millisecond} {
		s.Entry.Jitter = j
		f := s.Slot(from)
		require.Equal(t, from, f.Due)
		require.Empty(t, f.Why)
	}
}

// TestPreferredWindow: a firing outside preferred_window moves to the start
// of the next window, and its jitter then only delays it; jitter never
// takes a firing out of its window (preferred_window or only_between).
func TestPreferredWindow(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, "daily"),
		Location: berlin, PreferredWindow: windows(t, "03:00-05:00")}}
	midnight := time.Date(2026, 11, 18, 0, 0, 0, 0, berlin)
	f := s.Slot(midnight)
	require.Equal(t, midnight.UTC(), f.Nominal)
	require.Equal(t, time.Date(2026, 11, 18, 3, 0, 0, 0, berlin).UTC(), f.Due)
	require.Equal(t, []string{"moved from 2026-11-18 00:00:00 CET to 2026-11-18 03:00:00 CET (preferred_window 03:00-05:00)"}, f.Why)

	// With jitter, a moved firing lands in [start, start + jitter/2],
	// spread over it (not half of them on the start itself).
	s.Entry.Jitter = time.Hour
	atStart := 0
	for d := range 1000 {
		n := midnight.AddDate(0, 0, d)
		f := s.Slot(n)
		start := time.Date(n.Year(), n.Month(), n.Day(), 3, 0, 0, 0, berlin)
		require.False(t, f.Due.Before(start), "%s", f.Due)
		require.False(t, f.Due.After(start.Add(30*time.Minute)), "%s", f.Due)
		if f.Due.Equal(start) {
			atStart++
		}
	}
	require.Less(t, atStart, 5)

	// Never outside its window, whatever the jitter: day windows, windows
	// across midnight, lists, only_between, DST changes.
	inWindow := func(due time.Time, ws []schedule.Window) bool {
		w := due.In(berlin)
		tod := time.Duration(w.Hour())*time.Hour + time.Duration(w.Minute())*time.Minute + time.Duration(w.Second())*time.Second + time.Duration(w.Nanosecond())
		for _, win := range ws {
			if win.Start < win.End && tod >= win.Start && tod < win.End || win.Start > win.End && (tod >= win.Start || tod < win.End) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		preferred, only []string
		every           string
		jitter          time.Duration
	}{
		{preferred: []string{"08:00-22:00"}, every: "10m", jitter: 30 * time.Minute},
		{preferred: []string{"22:00-02:00"}, every: "15m", jitter: 2 * time.Hour},
		{preferred: []string{"06:00-06:10", "18:00-18:10"}, every: "7m", jitter: time.Hour},
		{only: []string{"09:00-17:00"}, every: "20m", jitter: 3 * time.Hour},
		{only: []string{"01:00-03:00"}, every: "10m", jitter: 40 * time.Minute},
		{preferred: []string{"08:00-20:00"}, only: []string{"07:00-09:00", "19:00-21:00"}, every: "5m", jitter: 20 * time.Minute},
	} {
		e := schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, tc.every), Location: berlin, Jitter: tc.jitter}
		if tc.preferred != nil {
			e.PreferredWindow = windows(t, tc.preferred...)
		}
		if tc.only != nil {
			e.OnlyBetween = windows(t, tc.only...)
		}
		s := schedule.Schedule{Plugin: "p", Entry: e}
		moved := 0
		// From before the spring change to after it, and the autumn one.
		for _, from := range []time.Time{time.Date(2026, 3, 27, 0, 0, 0, 0, berlin), time.Date(2026, 10, 23, 0, 0, 0, 0, berlin)} {
			n := from
			for range 1500 {
				next, _, ok := s.Nominal(n)
				require.True(t, ok)
				n = next
				f := s.Slot(n)
				if e.PreferredWindow != nil {
					require.True(t, inWindow(f.Due, e.PreferredWindow), "%v: %s due %s", tc, n.In(berlin), f.Due.In(berlin))
				}
				if e.OnlyBetween != nil && inWindow(f.Due, e.PreferredWindow) || e.PreferredWindow == nil {
					require.True(t, inWindow(f.Due, e.OnlyBetween), "%v: %s due %s", tc, n.In(berlin), f.Due.In(berlin))
				}
				if f.Due.Sub(n) > tc.jitter/2 {
					moved++
				}
			}
		}
		require.Equal(t, tc.preferred != nil, moved > 0, "%v", tc)
	}
}

// plan returns s's plan, checking what every plan must satisfy: firings
// due by now in order, after last, the next one after now.
func plan(t *testing.T, s schedule.Schedule, last *schedule.Slot, now time.Time) schedule.Plan {
	t.Helper()
	p := s.Plan(last, now)
	prev := last
	if p.Skip != nil {
		require.Positive(t, p.Skip.Count)
		require.False(t, p.Skip.Last.Due.After(now))
		require.False(t, p.Skip.Last.Nominal.Before(p.Skip.First.Nominal))
		if last != nil {
			require.True(t, p.Skip.First.Nominal.After(last.Nominal))
		}
		prev = &p.Skip.Last
	}
	for _, f := range p.Fire {
		require.False(t, f.Due.After(now), "fires %s, due %s after now", f.Nominal, f.Due)
		if prev != nil {
			require.True(t, f.Nominal.After(prev.Nominal))
			require.False(t, f.Due.Before(prev.Due))
		}
		prev = &f.Slot
	}
	if p.Next != nil {
		require.True(t, p.Next.Due.After(now))
		require.Empty(t, p.Done)
	} else {
		require.NotEmpty(t, p.Done)
	}
	return p
}

func nominalsOf(fs []schedule.Firing) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Nominal.Format("01-02 15:04:05")
	}
	return out
}

// TestCatchUp covers each catch_up mode: firings after the last recorded
// one whose due time has come are due; one more than a minute late was
// missed.
func TestCatchUp(t *testing.T) {
	t.Parallel()
	hourly := func(c schedule.CatchUp) schedule.Schedule {
		return schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, "hourly"), Location: time.UTC, CatchUp: c}}
	}
	at9 := &schedule.Slot{Nominal: utc(2026, 11, 18, 9, 0, 0), Due: utc(2026, 11, 18, 9, 0, 0)}
	type want struct {
		fire       []string
		skip       string // "count first..last: reason"
		next       string
		fireReason string
	}
	for _, tc := range []struct {
		name    string
		catchUp schedule.CatchUp
		last    *schedule.Slot
		now     time.Time
		want    want
	}{
		{"not due yet", schedule.CatchUpSkip, at9, utc(2026, 11, 18, 9, 30, 0), want{next: "11-18 10:00:00"}},
		{"due now", schedule.CatchUpSkip, at9, utc(2026, 11, 18, 10, 0, 0), want{fire: []string{"11-18 10:00:00"}, next: "11-18 11:00:00"}},
		{"a little late is on time", schedule.CatchUpSkip, at9, utc(2026, 11, 18, 10, 0, 59), want{fire: []string{"11-18 10:00:00"}, next: "11-18 11:00:00"}},
		{"skip: missed", schedule.CatchUpSkip, at9, utc(2026, 11, 18, 13, 30, 0), want{
			skip: "4 11-18 10:00:00..11-18 13:00:00: 4 missed firings, the latest due 30m0s ago, more than 1m0s late (catch_up skip)",
			next: "11-18 14:00:00"}},
		{"skip: missed, the latest on time", schedule.CatchUpSkip, at9, utc(2026, 11, 18, 13, 0, 20), want{
			fire: []string{"11-18 13:00:00"},
			skip: "3 11-18 10:00:00..11-18 12:00:00: 3 missed firings (catch_up skip runs only the latest, which is on time)",
			next: "11-18 14:00:00"}},
		{"run_once", schedule.CatchUpRunOnce, at9, utc(2026, 11, 18, 13, 30, 0), want{
			fire:       []string{"11-18 13:00:00"},
			fireReason: "30m0s late (catch_up run_once)",
			skip:       "3 11-18 10:00:00..11-18 12:00:00: 3 missed firings, replaced by one run now (catch_up run_once)",
			next:       "11-18 14:00:00"}},
		{"run_once, one missed", schedule.CatchUpRunOnce, at9, utc(2026, 11, 18, 10, 30, 0), want{
			fire: []string{"11-18 10:00:00"}, fireReason: "30m0s late (catch_up run_once)", next: "11-18 11:00:00"}},
		{"run_all", schedule.CatchUpRunAll, at9, utc(2026, 11, 18, 13, 30, 0), want{
			fire: []string{"11-18 10:00:00", "11-18 11:00:00", "11-18 12:00:00", "11-18 13:00:00"}, fireReason: "3h30m0s late (catch_up run_all)", next: "11-18 14:00:00"}},
		{"run_all beyond the bound", schedule.CatchUpRunAll, at9, utc(2026, 11, 27, 9, 30, 0), want{
			// 216 missed: the 100 most recent run.
			fire: func() []string {
				var out []string
				for i := 116; i >= 1; i-- {
					if i <= 100 {
						out = append(out, utc(2026, 11, 27, 9, 0, 0).Add(-time.Duration(i-1)*time.Hour).Format("01-02 15:04:05"))
					}
				}
				return out
			}(),
			fireReason: "99h30m0s late (catch_up run_all)",
			skip:       "116 11-18 10:00:00..11-23 05:00:00: 116 missed firings beyond the 100 most recent (catch_up run_all runs at most 100)",
			next:       "11-27 10:00:00"}},
		{"first plan, on time", schedule.CatchUpSkip, nil, utc(2026, 11, 18, 10, 0, 30), want{fire: []string{"11-18 10:00:00"}, next: "11-18 11:00:00"}},
		{"first plan: what came before is not missed", schedule.CatchUpRunAll, nil, utc(2026, 11, 18, 10, 30, 0), want{next: "11-18 11:00:00"}},
		{"the clock went back: nothing before the last due", schedule.CatchUpRunAll, &schedule.Slot{Nominal: utc(2026, 11, 18, 9, 0, 0), Due: utc(2026, 11, 18, 12, 0, 0)}, utc(2026, 11, 18, 11, 0, 0), want{next: "11-18 10:00:00"}},
	} {
		p := plan(t, hourly(tc.catchUp), tc.last, tc.now)
		require.Equal(t, tc.want.fire, append([]string(nil), nominalsOf(p.Fire)...), tc.name)
		if tc.want.fire == nil {
			require.Empty(t, p.Fire, tc.name)
		}
		for _, f := range p.Fire[:min(1, len(p.Fire))] {
			if tc.want.fireReason == "" {
				require.Empty(t, f.Why, tc.name)
			} else {
				require.Equal(t, []string{tc.want.fireReason}, f.Why, tc.name)
			}
		}
		if tc.want.skip == "" {
			require.Nil(t, p.Skip, tc.name)
		} else {
			require.NotNil(t, p.Skip, tc.name)
			require.False(t, p.Skip.AtLeast)
			require.Equal(t, tc.want.skip, fmt.Sprintf("%d %s..%s: %s", p.Skip.Count, p.Skip.First.Nominal.Format("01-02 15:04:05"), p.Skip.Last.Nominal.Format("01-02 15:04:05"), p.Skip.Reason), tc.name)
		}
		require.Equal(t, tc.want.next, p.Next.Nominal.Format("01-02 15:04:05"), tc.name)
	}

	// The clock that went back: the next firing waits for the last due time.
	p := plan(t, hourly(schedule.CatchUpSkip), &schedule.Slot{Nominal: utc(2026, 11, 18, 9, 0, 0), Due: utc(2026, 11, 18, 12, 0, 0)}, utc(2026, 11, 18, 11, 0, 0))
	require.Equal(t, utc(2026, 11, 18, 12, 0, 0), p.Next.Due)
	require.Contains(t, p.Next.Why, "held back from 2026-11-18 10:00:00 UTC to the previous firing's due time")
}

// TestCatchUpCoalesces: firings that come due together on time (moved to
// one window start, or a pause of the loop shorter than the grace) run
// once under skip and run_once, each under run_all.
func TestCatchUpCoalesces(t *testing.T) {
	t.Parallel()
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, "5m"),
		Location: time.UTC, PreferredWindow: windows(t, "08:00-22:00")}}
	last := &schedule.Slot{Nominal: utc(2026, 11, 18, 21, 55, 0), Due: utc(2026, 11, 18, 21, 55, 0)}
	p := plan(t, s, last, utc(2026, 11, 18, 23, 0, 0))
	require.Empty(t, p.Fire)
	require.Nil(t, p.Skip)
	require.Equal(t, utc(2026, 11, 18, 22, 0, 0), p.Next.Nominal)
	require.Equal(t, utc(2026, 11, 19, 8, 0, 0), p.Next.Due)

	p = plan(t, s, last, utc(2026, 11, 19, 8, 0, 0))
	require.Equal(t, []string{"11-19 08:00:00"}, nominalsOf(p.Fire))
	require.Equal(t, 120, p.Skip.Count)
	require.Equal(t, utc(2026, 11, 18, 22, 0, 0), p.Skip.First.Nominal)
	require.Equal(t, "120 earlier firings due together with it (catch_up skip runs only the latest)", p.Skip.Reason)
	require.Equal(t, utc(2026, 11, 19, 8, 5, 0), p.Next.Due)

	s.Entry.CatchUp = schedule.CatchUpRunAll
	p = plan(t, s, last, utc(2026, 11, 19, 8, 0, 0))
	require.Len(t, p.Fire, 100)
	require.Equal(t, 21, p.Skip.Count)
}

// TestCatchUpLongGap: a year without firings of a 1s schedule is planned
// from the most recent firings, without walking all 31 million.
func TestCatchUpLongGap(t *testing.T) {
	t.Parallel()
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, "1s"), Location: time.UTC}}
	last := &schedule.Slot{Nominal: utc(2025, 11, 18, 0, 0, 0), Due: utc(2025, 11, 18, 0, 0, 0)}
	now := utc(2026, 11, 18, 12, 0, 0).Add(400 * time.Millisecond)

	p := plan(t, s, last, now)
	require.Equal(t, []string{"11-18 12:00:00"}, nominalsOf(p.Fire))
	require.True(t, p.Skip.AtLeast)
	require.GreaterOrEqual(t, p.Skip.Count, 100)
	require.Equal(t, utc(2025, 11, 18, 0, 0, 1), p.Skip.First.Nominal)
	require.Equal(t, utc(2026, 11, 18, 11, 59, 59), p.Skip.Last.Nominal)
	require.True(t, strings.HasPrefix(p.Skip.Reason, "at least "), p.Skip.Reason)

	s.Entry.CatchUp = schedule.CatchUpRunAll
	p = plan(t, s, last, now)
	require.Len(t, p.Fire, 100)
	require.Equal(t, utc(2026, 11, 18, 11, 58, 21), p.Fire[0].Nominal)
	require.Equal(t, utc(2026, 11, 18, 11, 58, 20), p.Skip.Last.Nominal)
	require.Equal(t, utc(2026, 11, 18, 12, 0, 1), p.Next.Nominal)
}

// TestPlanIsStable: a plan depends on the last recorded firing and now
// only, so a restart plans the same firings at the same due times, and
// recording a firing is what stops it from firing again.
func TestPlanIsStable(t *testing.T) {
	t.Parallel()
	e := schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, "15m"), Location: zone(t, "Europe/Berlin"), Jitter: 10 * time.Minute}
	s := schedule.Schedule{Plugin: "p", Entry: e}
	last := &schedule.Slot{Nominal: utc(2026, 11, 18, 9, 0, 0), Due: utc(2026, 11, 18, 9, 2, 0)}
	first := plan(t, s, last, utc(2026, 11, 18, 9, 5, 0))
	for _, now := range []time.Time{utc(2026, 11, 18, 9, 5, 1), utc(2026, 11, 18, 9, 7, 0)} {
		again := plan(t, schedule.Schedule{Plugin: "p", Entry: e, Start: now}, last, now)
		require.Equal(t, first.Next, again.Next)
	}
	due := first.Next.Due
	p := plan(t, s, last, due)
	require.Len(t, p.Fire, 1)
	require.Equal(t, first.Next.Slot, p.Fire[0].Slot)
	// Once recorded, the same instant plans nothing more.
	recorded := p.Fire[0].Slot
	p = plan(t, s, &recorded, due)
	require.Empty(t, p.Fire)
	require.Nil(t, p.Skip)
	require.True(t, p.Next.Nominal.After(recorded.Nominal))
}

func TestOneShots(t *testing.T) {
	t.Parallel()
	at := utc(2026, 12, 1, 9, 0, 0)
	atEntry := func(c schedule.CatchUp) schedule.Schedule {
		return schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindAt, At: at, CatchUp: c}}
	}
	// Before its time: next; at its time: fires; recorded: done.
	p := plan(t, atEntry(schedule.CatchUpSkip), nil, at.Add(-time.Hour))
	require.Equal(t, at, p.Next.Due)
	p = plan(t, atEntry(schedule.CatchUpSkip), nil, at)
	require.Equal(t, []string{"12-01 09:00:00"}, nominalsOf(p.Fire))
	require.Equal(t, "at 2026-12-01T09:00:00Z: a one-shot, nothing after it", p.Done)
	fired := p.Fire[0].Slot
	p = plan(t, atEntry(schedule.CatchUpSkip), &fired, at.Add(time.Hour))
	require.Empty(t, p.Fire)
	require.Nil(t, p.Skip)
	require.Equal(t, "at 2026-12-01T09:00:00Z: a one-shot, nothing after it", p.Done)

	// In the past when first planned: catch_up decides.
	p = plan(t, atEntry(schedule.CatchUpSkip), nil, at.Add(30*time.Second))
	require.Len(t, p.Fire, 1, "on time")
	p = plan(t, atEntry(schedule.CatchUpSkip), nil, at.Add(time.Hour))
	require.Empty(t, p.Fire)
	require.Equal(t, "1 missed firing, the latest due 1h0m0s ago, more than 1m0s late (catch_up skip)", p.Skip.Reason)
	require.Equal(t, at, p.Skip.Last.Nominal)
	skipped := p.Skip.Last
	p = plan(t, atEntry(schedule.CatchUpSkip), &skipped, at.Add(2*time.Hour))
	require.Empty(t, p.Fire)
	require.Nil(t, p.Skip, "a skipped one-shot is done too")
	for _, c := range []schedule.CatchUp{schedule.CatchUpRunOnce, schedule.CatchUpRunAll} {
		p = plan(t, atEntry(c), nil, at.Add(time.Hour))
		require.Equal(t, []string{"12-01 09:00:00"}, nominalsOf(p.Fire), c)
	}
	// Moved to a later time, it fires again; to one before the newest
	// recorded firing, it does not.
	later := atEntry(schedule.CatchUpSkip)
	later.Entry.At = at.Add(24 * time.Hour)
	p = plan(t, later, &fired, at.Add(24*time.Hour))
	require.Len(t, p.Fire, 1)
	earlier := atEntry(schedule.CatchUpSkip)
	earlier.Entry.At = at.Add(-time.Hour)
	p = plan(t, earlier, &fired, at.Add(time.Hour))
	require.Empty(t, p.Fire)
	require.Equal(t, "at 2026-12-01T08:00:00Z: a one-shot whose time is before the newest firing recorded (2026-12-01T09:00:00Z)", p.Done)

	// after: counted from the service start, once per start.
	start := utc(2026, 11, 18, 8, 0, 0)
	after := schedule.Schedule{Plugin: "p", Start: start, Entry: schedule.Entry{ID: "warmup", Kind: schedule.KindAfter, After: 10 * time.Minute, Location: time.UTC}}
	p = plan(t, after, nil, start.Add(time.Minute))
	require.Equal(t, schedule.Slot{Nominal: start.Add(10 * time.Minute), Due: start.Add(10 * time.Minute), Start: start}, p.Next.Slot)
	p = plan(t, after, nil, start.Add(10*time.Minute))
	require.Len(t, p.Fire, 1)
	fired = p.Fire[0].Slot
	p = plan(t, after, &fired, start.Add(time.Hour))
	require.Empty(t, p.Fire)
	require.Nil(t, p.Next)
	require.Equal(t, "after 10m0s: once per service start (this one at 2026-11-18 08:00:00 UTC)", p.Done)
	// Still done when the delay is changed (by a reload) during the run.
	longer := after
	longer.Entry.After = time.Hour
	p = plan(t, longer, &fired, start.Add(time.Hour))
	require.Empty(t, p.Fire)
	require.Nil(t, p.Skip)
	require.Nil(t, p.Next)
	// A restart arms it again.
	restart := start.Add(3 * time.Hour)
	after.Start = restart
	p = plan(t, after, &fired, restart)
	require.Equal(t, restart.Add(10*time.Minute), p.Next.Due)
	// Jitter never takes it before the start it counts from.
	after.Entry.After, after.Entry.Jitter = 0, time.Hour
	for i := range 200 {
		after.Start = restart.Add(time.Duration(i) * time.Second)
		f := after.Slot(after.Start)
		require.False(t, f.Due.Before(after.Start))
	}
}

// TestNewEntryCountsNothingBeforeItExisted: a new entry (no last firing)
// runs at most the latest firing due within Grace, whatever its catch_up,
// and records no skip for the firings before it existed.
func TestNewEntryCountsNothingBeforeItExisted(t *testing.T) {
	t.Parallel()
	now := utc(2026, 11, 19, 8, 0, 30)
	for _, c := range []schedule.CatchUp{schedule.CatchUpSkip, schedule.CatchUpRunOnce, schedule.CatchUpRunAll} {
		s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, "3s"),
			Location: time.UTC, CatchUp: c}}
		p := plan(t, s, nil, now)
		require.Equal(t, []string{"11-19 08:00:30"}, nominalsOf(p.Fire), "catch_up %s", c)
		require.Nil(t, p.Skip, "catch_up %s", c)
		require.Equal(t, utc(2026, 11, 19, 8, 0, 33), p.Next.Nominal)
	}
}

// TestSinceStartsAnEntryAfresh: an entry applied again (or changed) at
// Since plans as a new one, from its last firing but with nothing missed:
// the latest firing within Grace runs, the gap is not its history; with a
// zero Since (it ran unchanged) the gap is caught up.
func TestSinceStartsAnEntryAfresh(t *testing.T) {
	t.Parallel()
	now := utc(2026, 11, 19, 8, 0, 30)
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, "1m"),
		Location: time.UTC, CatchUp: schedule.CatchUpRunAll}}
	last := &schedule.Slot{Nominal: utc(2026, 11, 19, 0, 0, 0), Due: utc(2026, 11, 19, 0, 0, 0)}

	p := plan(t, s, last, now)
	require.Len(t, p.Fire, 100, "unchanged: run_all catches the gap up")
	require.NotNil(t, p.Skip)

	s.Since = now.Add(-time.Second)
	p = plan(t, s, last, now)
	require.Equal(t, []string{"11-19 08:00:00"}, nominalsOf(p.Fire))
	require.Nil(t, p.Skip)

	// Applied again within Grace of its last firing: that firing is not run
	// twice.
	recent := &schedule.Slot{Nominal: utc(2026, 11, 19, 8, 0, 0), Due: utc(2026, 11, 19, 8, 0, 0)}
	p = plan(t, s, recent, now)
	require.Empty(t, p.Fire)
	require.Nil(t, p.Skip)
	require.Equal(t, utc(2026, 11, 19, 8, 1, 0), p.Next.Nominal)
}
