package schedule_test

import (
	"testing"
	"time"

	"github.com/ductile/ductile/schedule"
)

// checkRule checks what every rule must do, in a zone with DST changes:
// each next time is after the instant asked about, and asking just before
// a time gives that time back.
func checkRule(t *testing.T, kind schedule.Kind, r schedule.Rule) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: kind, Rule: r, Location: berlin, Jitter: time.Minute}}
	for _, from := range []time.Time{
		time.Date(2026, 3, 29, 1, 59, 0, 0, berlin),    // before the spring change
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // inside the repeated hour
		time.Date(2026, 11, 18, 10, 7, 13, 5, berlin),
	} {
		at := from
		for range 3 {
			n, _, ok := s.Nominal(at)
			if !ok {
				t.Fatalf("%s %q: no time after %s", kind, r, at)
			}
			if !n.After(at) {
				t.Fatalf("%s %q: %s is not after %s", kind, r, n, at)
			}
			if again, _, _ := s.Nominal(n.Add(-time.Nanosecond)); !again.Equal(n) {
				t.Fatalf("%s %q: asked just before %s, got %s", kind, r, n, again)
			}
			f := s.Slot(n)
			if d := f.Due.Sub(n); d < -30*time.Second || d > 30*time.Second {
				t.Fatalf("%s %q: jitter %s out of bounds", kind, r, d)
			}
			at = n
		}
	}
}

func FuzzParseEvery(f *testing.F) {
	for _, s := range []string{"5m", "15m", "30m", "hourly", "2h", "daily", "weekly", "monthly", "1s", "7m", "2d", "1d12h", "1.5s", "25h", "-1s", "0", "", "1d-1h", "99999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := schedule.ParseEvery(in)
		if err != nil {
			return
		}
		if r.String() != in {
			t.Fatalf("%q reads back as %q", in, r.String())
		}
		if d := r.Every(); d != 0 && d < schedule.MinEvery {
			t.Fatalf("%q: interval %s under the minimum", in, d)
		}
		checkRule(t, schedule.KindEvery, r)
	})
}

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"*/5 * * * *", "0 9 * * 1-5", "30 2 * * *", "0 0 29 2 *", "0 0 30 2 *", "0 0 13 * 5", "0 0 */10 * 2", "@daily", "TZ=UTC * * * * *", "5-1 * * * *", "*/0 * * * *", "0 0 1 jan,jul sun"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r, err := schedule.ParseCron(in)
		if err != nil {
			return
		}
		checkRule(t, schedule.KindCron, r)
	})
}

func FuzzParseWindow(f *testing.F) {
	for _, s := range []string{"08:00-22:00", "22:00-06:00", "8:30 - 9:45", "18:00-24:00", "00:00-24:00", "24:00-01:00", "08:00", "-", "1:2-3:4", "23:59-00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		w, err := schedule.ParseWindow(in)
		if err != nil {
			return
		}
		if w.Start == w.End || w.Start < 0 || w.Start >= 24*time.Hour || w.End < 0 || w.End > 24*time.Hour {
			t.Fatalf("%q: bad window %+v", in, w)
		}
		back, err := schedule.ParseWindow(w.String())
		if err != nil || back != w {
			t.Fatalf("%q: %s reads back as %+v, %v", in, w, back, err)
		}
	})
}
