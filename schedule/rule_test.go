package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/schedule"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func every(t *testing.T, s string) schedule.Rule {
	t.Helper()
	r, err := schedule.ParseEvery(s)
	require.NoError(t, err)
	return r
}

func cronRule(t *testing.T, s string) schedule.Rule {
	t.Helper()
	r, err := schedule.ParseCron(s)
	require.NoError(t, err)
	return r
}

// nominals returns the first n nominal times of s after from.
func nominals(t *testing.T, s schedule.Schedule, from time.Time, n int) []time.Time {
	t.Helper()
	var out []time.Time
	for len(out) < n {
		next, _, ok := s.Nominal(from)
		require.True(t, ok, "no nominal time after %s (have %v)", from, out)
		require.True(t, next.After(from), "%s is not after %s", next, from)
		out = append(out, next)
		from = next
	}
	return out
}

// inZone writes times as loc's clock reads them, with the offset.
func inZone(ts []time.Time, loc *time.Location) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.In(loc).Format("2006-01-02 15:04:05 -0700")
	}
	return out
}

func TestParseEvery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		every time.Duration
	}{
		{"5m", 5 * time.Minute}, {"15m", 15 * time.Minute}, {"30m", 30 * time.Minute},
		{"hourly", time.Hour}, {"2h", 2 * time.Hour}, {"daily", 24 * time.Hour},
		{"weekly", 0}, {"monthly", 0}, // calendar rules: their gaps vary
		{"1s", time.Second}, {"90s", 90 * time.Second}, {"7m", 7 * time.Minute},
		{"2d", 48 * time.Hour}, {"1d12h", 36 * time.Hour}, {"1.5s", 1500 * time.Millisecond}, {"1830d", 1830 * 24 * time.Hour},
	} {
		r, err := schedule.ParseEvery(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.in, r.String())
		require.Equal(t, tc.every, r.Every(), tc.in)
		require.False(t, r.IsCron(), tc.in)
	}
	for in, want := range map[string]string{
		"":          `invalid interval "": use a duration like 90s, 15m or 2h (at least 1s), whole days like 2d, or one of hourly, daily, weekly, monthly`,
		"5 minutes": `invalid interval "5 minutes": use a duration like 90s, 15m or 2h (at least 1s), whole days like 2d, or one of hourly, daily, weekly, monthly`,
		"Hourly":    `invalid interval "Hourly": use a duration like 90s, 15m or 2h (at least 1s), whole days like 2d, or one of hourly, daily, weekly, monthly`,
		"500ms":     "interval 500ms is shorter than the minimum of 1s",
		"-5m":       "interval -5m is shorter than the minimum of 1s",
		"0s":        "interval 0s is shorter than the minimum of 1s",
		"1831d":     "interval 1831d is longer than the maximum of 1830d (5 years): for one run at a given time use at:",
	} {
		_, err := schedule.ParseEvery(in)
		require.EqualError(t, err, want, in)
	}
}

func TestParseCron(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "0 0 29 2 *", "0 0 * * sun", "0 0 1 jan *", "0  9 * * *"} {
		r, err := schedule.ParseCron(in)
		require.NoError(t, err, in)
		require.True(t, r.IsCron())
		require.Equal(t, in, r.String())
		require.Zero(t, r.Every())
	}
	for in, want := range map[string]string{
		"* * * *":                     `invalid cron "* * * *": need 5 fields (minute hour day-of-month month day-of-week), found 4, e.g. "30 9 * * 1-5"`,
		"0 0 0 * * *":                 `invalid cron "0 0 0 * * *": need 5 fields (minute hour day-of-month month day-of-week), found 6, e.g. "30 9 * * 1-5"`,
		"61 * * * *":                  `invalid cron "61 * * * *": end of range (61) above maximum (59): 61 (fields: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-6 with 0 Sunday)`,
		"0 0 * * 7":                   `invalid cron "0 0 * * 7": end of range (7) above maximum (6): 7 (fields: minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-6 with 0 Sunday)`,
		"0 0 30 2 *":                  `invalid cron "0 0 30 2 *": it never matches a date (like February 30th)`,
		"0 0 31 4,6 *":                `invalid cron "0 0 31 4,6 *": it never matches a date (like February 30th)`,
		"@daily":                      `invalid cron "@daily": write 5 fields; for @hourly, @daily, @weekly or @monthly use every: hourly (daily, …)`,
		"TZ=Europe/Berlin 0 9 * * *":  `invalid cron "TZ=Europe/Berlin 0 9 * * *": a time zone prefix is not read here: set timezone: instead`,
		"CRON_TZ=UTC 0 9 * * *":       `invalid cron "CRON_TZ=UTC 0 9 * * *": a time zone prefix is not read here: set timezone: instead`,
		"0 9 * * mon-fri extra field": `invalid cron "0 9 * * mon-fri extra field": need 5 fields (minute hour day-of-month month day-of-week), found 7, e.g. "30 9 * * 1-5"`,
	} {
		_, err := schedule.ParseCron(in)
		require.EqualError(t, err, want, in)
	}
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]schedule.Window{
		"08:00-22:00":   {Start: 8 * time.Hour, End: 22 * time.Hour},
		"22:00-06:00":   {Start: 22 * time.Hour, End: 6 * time.Hour},
		"8:30 - 9:45":   {Start: 8*time.Hour + 30*time.Minute, End: 9*time.Hour + 45*time.Minute},
		"18:00-24:00":   {Start: 18 * time.Hour, End: 24 * time.Hour},
		"00:00-00:01":   {Start: 0, End: time.Minute},
		"23:59-00:00":   {Start: 23*time.Hour + 59*time.Minute, End: 0},
		"12:00-11:59":   {Start: 12 * time.Hour, End: 11*time.Hour + 59*time.Minute},
		" 01:00-02:00 ": {Start: time.Hour, End: 2 * time.Hour},
	} {
		w, err := schedule.ParseWindow(in)
		require.NoError(t, err, in)
		require.Equal(t, want, w, in)
	}
	w, _ := schedule.ParseWindow("8:30-24:00")
	require.Equal(t, "08:30-24:00", w.String())

	for in, want := range map[string]string{
		"08:00":       `invalid window "08:00": write "HH:MM-HH:MM", e.g. "08:00-22:00" (across midnight: "22:00-06:00")`,
		"8-22":        `invalid window "8-22": "8" is not a time like 08:00`,
		"08:00-25:00": `invalid window "08:00-25:00": "25:00" is not a time of day (00:00 to 23:59, or 24:00 as an end)`,
		"24:00-08:00": `invalid window "24:00-08:00": "24:00" is not a time of day (00:00 to 23:59)`,
		"08:60-09:00": `invalid window "08:60-09:00": "08:60" is not a time of day (00:00 to 23:59)`,
		"08:00-08:00": `invalid window "08:00-08:00": it starts where it ends: to allow the whole day, leave the key out`,
		"00:00-24:00": `invalid window "00:00-24:00": it starts where it ends: to allow the whole day, leave the key out`,
		"+8:00-09:00": `invalid window "+8:00-09:00": "+8:00" is not a time like 08:00`,
		"08:0-09:00":  `invalid window "08:0-09:00": "08:0" is not a time like 08:00`,
	} {
		_, err := schedule.ParseWindow(in)
		require.EqualError(t, err, want, in)
	}
}

func TestParseWeekday(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Weekday{
		"sunday": time.Sunday, "Saturday": time.Saturday, "sat": time.Saturday, "MON": time.Monday,
		"0": time.Sunday, "6": time.Saturday, "3": time.Wednesday,
	} {
		d, err := schedule.ParseWeekday(in)
		require.NoError(t, err, in)
		require.Equal(t, want, d, in)
	}
	for in, want := range map[string]string{
		"7":     "day 7 is out of range: use 0 (Sunday) to 6 (Saturday)",
		"-1":    "day -1 is out of range: use 0 (Sunday) to 6 (Saturday)",
		"satur": `"satur" is not a day: use a day name (saturday, or sat) or 0 (Sunday) to 6`,
		"sa":    `"sa" is not a day: use a day name (saturday, or sat) or 0 (Sunday) to 6`,
	} {
		_, err := schedule.ParseWeekday(in)
		require.EqualError(t, err, want, in)
	}
}

// TestEveryTimes: every: D that divides a day fires at local midnight +
// k·D; whole days at local midnight every N days (counted from
// 1970-01-01); any other D at k·D since 1970-01-01T00:00Z; the names as
// cron's @hourly, @daily, @weekly (Sunday) and @monthly (the 1st).
func TestEveryTimes(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	kolkata := zone(t, "Asia/Kolkata") // +05:30
	// Wednesday 2026-11-18 10:07:13 in Berlin (CET, +01:00).
	from := time.Date(2026, 11, 18, 10, 7, 13, 0, berlin)
	for _, tc := range []struct {
		every string
		loc   *time.Location
		want  []string
	}{
		{"5m", berlin, []string{"2026-11-18 10:10:00 +0100", "2026-11-18 10:15:00 +0100", "2026-11-18 10:20:00 +0100"}},
		{"1s", berlin, []string{"2026-11-18 10:07:14 +0100", "2026-11-18 10:07:15 +0100", "2026-11-18 10:07:16 +0100"}},
		{"hourly", berlin, []string{"2026-11-18 11:00:00 +0100", "2026-11-18 12:00:00 +0100", "2026-11-18 13:00:00 +0100"}},
		{"2h", berlin, []string{"2026-11-18 12:00:00 +0100", "2026-11-18 14:00:00 +0100", "2026-11-18 16:00:00 +0100"}},
		// In a zone half an hour off UTC, the grid is still on the local clock.
		{"hourly", kolkata, []string{"2026-11-18 15:00:00 +0530", "2026-11-18 16:00:00 +0530", "2026-11-18 17:00:00 +0530"}},
		{"daily", berlin, []string{"2026-11-19 00:00:00 +0100", "2026-11-20 00:00:00 +0100", "2026-11-21 00:00:00 +0100"}},
		{"90m", berlin, []string{"2026-11-18 10:30:00 +0100", "2026-11-18 12:00:00 +0100", "2026-11-18 13:30:00 +0100"}},
		// 7m does not divide a day: multiples of 7m since the epoch, in UTC.
		{"7m", time.UTC, []string{"2026-11-18 09:11:00 +0000", "2026-11-18 09:18:00 +0000", "2026-11-18 09:25:00 +0000"}},
		{"25h", time.UTC, []string{"2026-11-19 01:00:00 +0000", "2026-11-20 02:00:00 +0000", "2026-11-21 03:00:00 +0000"}},
		// 2026-11-19 is day 20776 since 1970-01-01: every 2d lands on even days.
		{"2d", berlin, []string{"2026-11-19 00:00:00 +0100", "2026-11-21 00:00:00 +0100", "2026-11-23 00:00:00 +0100"}},
		{"weekly", berlin, []string{"2026-11-22 00:00:00 +0100", "2026-11-29 00:00:00 +0100", "2026-12-06 00:00:00 +0100"}},
		{"monthly", berlin, []string{"2026-12-01 00:00:00 +0100", "2027-01-01 00:00:00 +0100", "2027-02-01 00:00:00 +0100"}},
	} {
		s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: every(t, tc.every), Location: tc.loc}}
		got := inZone(nominals(t, s, from, 3), tc.loc)
		require.Equal(t, tc.want, got, "every %s", tc.every)
	}
	// A nominal time is strictly after the instant asked about.
	s := schedule.Schedule{Entry: schedule.Entry{Kind: schedule.KindEvery, Rule: every(t, "5m"), Location: berlin}}
	on := time.Date(2026, 11, 18, 10, 10, 0, 0, berlin)
	n, _, ok := s.Nominal(on)
	require.True(t, ok)
	require.Equal(t, on.Add(5*time.Minute).UTC(), n)
	n, _, _ = s.Nominal(on.Add(-time.Nanosecond))
	require.Equal(t, on.UTC(), n)
}

func TestCronTimes(t *testing.T) {
	t.Parallel()
	ny := zone(t, "America/New_York")
	// Friday 2026-11-20 17:00 in New York.
	from := time.Date(2026, 11, 20, 17, 0, 0, 0, ny)
	for _, tc := range []struct {
		cron string
		want []string
	}{
		{"0 9 * * 1-5", []string{"2026-11-23 09:00:00 -0500", "2026-11-24 09:00:00 -0500", "2026-11-25 09:00:00 -0500"}},
		{"*/20 17 * * *", []string{"2026-11-20 17:20:00 -0500", "2026-11-20 17:40:00 -0500", "2026-11-21 17:00:00 -0500"}},
		// Day of month and day of week both restricted: either matches.
		{"0 0 13 * 5", []string{"2026-11-27 00:00:00 -0500", "2026-12-04 00:00:00 -0500", "2026-12-11 00:00:00 -0500"}},
		// One of them is * (*/10 counts, as in cron): both must match.
		{"0 0 */10 * 2", []string{"2026-12-01 00:00:00 -0500", "2027-05-11 00:00:00 -0400", "2027-06-01 00:00:00 -0400"}},
		{"0 0 29 2 *", []string{"2028-02-29 00:00:00 -0500", "2032-02-29 00:00:00 -0500", "2036-02-29 00:00:00 -0500"}},
	} {
		s := schedule.Schedule{Entry: schedule.Entry{Kind: schedule.KindCron, Rule: cronRule(t, tc.cron), Location: ny}}
		require.Equal(t, tc.want, inZone(nominals(t, s, from, 3), ny), "cron %s", tc.cron)
	}
}

// TestDST: across a DST change, times follow cron(8): a particular time
// (no * in the minute or hour field; every: daily, weekly, monthly, Nd)
// that the clocks skip runs right after the jump, and one they repeat runs
// once; a wildcard (*, */n; every: shorter than a day, hourly) follows the
// clock: skipped times do not happen, repeated ones happen twice.
func TestDST(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin") // 2026-03-29 02:00→03:00, 2026-10-25 03:00→02:00
	ny := zone(t, "America/New_York")  // 2026-03-08 02:00→03:00, 2026-11-01 02:00→01:00
	for _, tc := range []struct {
		name string
		loc  *time.Location
		rule schedule.Rule
		kind schedule.Kind
		from time.Time
		want []string
	}{
		{"daily 02:30, Berlin, spring forward: runs at 03:00", berlin, cronRule(t, "30 2 * * *"), schedule.KindCron,
			time.Date(2026, 3, 28, 12, 0, 0, 0, berlin),
			[]string{"2026-03-29 03:00:00 +0200", "2026-03-30 02:30:00 +0200"}},
		{"daily 02:30, Berlin, fall back: runs once", berlin, cronRule(t, "30 2 * * *"), schedule.KindCron,
			time.Date(2026, 10, 24, 12, 0, 0, 0, berlin),
			[]string{"2026-10-25 02:30:00 +0200", "2026-10-26 02:30:00 +0100"}},
		{"two times in the skipped hour run once, at 03:00", berlin, cronRule(t, "15,45 2 * * *"), schedule.KindCron,
			time.Date(2026, 3, 29, 1, 0, 0, 0, berlin),
			[]string{"2026-03-29 03:00:00 +0200", "2026-03-30 02:15:00 +0200"}},
		{"hourly, Berlin, spring forward: 02:00 does not happen", berlin, every(t, "hourly"), schedule.KindEvery,
			time.Date(2026, 3, 29, 0, 30, 0, 0, berlin),
			[]string{"2026-03-29 01:00:00 +0100", "2026-03-29 03:00:00 +0200", "2026-03-29 04:00:00 +0200"}},
		{"hourly, Berlin, fall back: 02:00 happens twice", berlin, every(t, "hourly"), schedule.KindEvery,
			time.Date(2026, 10, 25, 0, 30, 0, 0, berlin),
			[]string{"2026-10-25 01:00:00 +0200", "2026-10-25 02:00:00 +0200", "2026-10-25 02:00:00 +0100", "2026-10-25 03:00:00 +0100"}},
		{"every 2h, Berlin, fall back: as 0 */2 * * *", berlin, every(t, "2h"), schedule.KindEvery,
			time.Date(2026, 10, 25, 0, 30, 0, 0, berlin),
			[]string{"2026-10-25 02:00:00 +0200", "2026-10-25 02:00:00 +0100", "2026-10-25 04:00:00 +0100"}},
		{"every 20m, New York, spring forward: even in real time", ny, every(t, "20m"), schedule.KindEvery,
			time.Date(2026, 3, 8, 1, 30, 0, 0, ny),
			[]string{"2026-03-08 01:40:00 -0500", "2026-03-08 03:00:00 -0400", "2026-03-08 03:20:00 -0400"}},
		{"every 30m, New York, fall back: even in real time", ny, every(t, "30m"), schedule.KindEvery,
			time.Date(2026, 11, 1, 1, 10, 0, 0, ny),
			[]string{"2026-11-01 01:30:00 -0400", "2026-11-01 01:00:00 -0500", "2026-11-01 01:30:00 -0500", "2026-11-01 02:00:00 -0500"}},
		{"01:30, New York, fall back: runs once", ny, cronRule(t, "30 1 * * *"), schedule.KindCron,
			time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			[]string{"2026-11-01 01:30:00 -0400", "2026-11-02 01:30:00 -0500"}},
		{"02:30, New York, spring forward: runs at 03:00", ny, cronRule(t, "30 2 * * *"), schedule.KindCron,
			time.Date(2026, 3, 7, 12, 0, 0, 0, ny),
			[]string{"2026-03-08 03:00:00 -0400", "2026-03-09 02:30:00 -0400"}},
		{"daily, New York, across both changes: local midnight", ny, every(t, "daily"), schedule.KindEvery,
			time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			[]string{"2026-11-01 00:00:00 -0400", "2026-11-02 00:00:00 -0500"}},
		{"*/30 minutes, 1 hour, New York, fall back: the 01:xx hour twice", ny, cronRule(t, "*/30 1 * * *"), schedule.KindCron,
			time.Date(2026, 11, 1, 0, 0, 0, 0, ny),
			[]string{"2026-11-01 01:00:00 -0400", "2026-11-01 01:30:00 -0400", "2026-11-01 01:00:00 -0500", "2026-11-01 01:30:00 -0500", "2026-11-02 01:00:00 -0500"}},
	} {
		s := schedule.Schedule{Entry: schedule.Entry{Kind: tc.kind, Rule: tc.rule, Location: tc.loc}}
		require.Equal(t, tc.want, inZone(nominals(t, s, tc.from, len(tc.want)), tc.loc), tc.name)
	}

	// Counted over a whole local day: hourly fires 23 times on the spring
	// day and 25 on the autumn day; a particular time once on both.
	perDay := func(rule schedule.Rule, kind schedule.Kind, loc *time.Location, y int, m time.Month, d int) int {
		s := schedule.Schedule{Entry: schedule.Entry{Kind: kind, Rule: rule, Location: loc}}
		start, end := time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
		count := 0
		for at := start.Add(-time.Nanosecond); ; {
			n, _, ok := s.Nominal(at)
			require.True(t, ok)
			if !n.Before(end) {
				return count
			}
			count, at = count+1, n
		}
	}
	for _, loc := range []*time.Location{berlin, ny} {
		spring, autumn := map[*time.Location][3]int{berlin: {2026, 3, 29}, ny: {2026, 3, 8}}[loc], map[*time.Location][3]int{berlin: {2026, 10, 25}, ny: {2026, 11, 1}}[loc]
		require.Equal(t, 23, perDay(every(t, "hourly"), schedule.KindEvery, loc, spring[0], time.Month(spring[1]), spring[2]), loc)
		require.Equal(t, 25, perDay(every(t, "hourly"), schedule.KindEvery, loc, autumn[0], time.Month(autumn[1]), autumn[2]), loc)
		require.Equal(t, 1, perDay(cronRule(t, "30 2 * * *"), schedule.KindCron, loc, spring[0], time.Month(spring[1]), spring[2]), loc)
		require.Equal(t, 1, perDay(cronRule(t, "30 1 * * *"), schedule.KindCron, loc, autumn[0], time.Month(autumn[1]), autumn[2]), loc)
		require.Equal(t, 23*12, perDay(every(t, "5m"), schedule.KindEvery, loc, spring[0], time.Month(spring[1]), spring[2]), loc)
		require.Equal(t, 25*12, perDay(every(t, "5m"), schedule.KindEvery, loc, autumn[0], time.Month(autumn[1]), autumn[2]), loc)
	}

	// Asked from inside the repeated hour, a particular time that already
	// ran the first time round does not run again.
	s := schedule.Schedule{Entry: schedule.Entry{Kind: schedule.KindCron, Rule: cronRule(t, "30 2 * * *"), Location: berlin}}
	secondPass := time.Date(2026, 10, 25, 1, 15, 0, 0, time.UTC) // 02:15 CET
	n, _, ok := s.Nominal(secondPass)
	require.True(t, ok)
	require.Equal(t, "2026-10-26 02:30:00 +0100", n.In(berlin).Format("2006-01-02 15:04:05 -0700"))
	// Asked exactly at the jump, a time the clocks skipped runs then.
	jump := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC) // 03:00 CEST
	n, _, _ = s.Nominal(jump.Add(-time.Nanosecond))
	require.Equal(t, jump, n)
}
