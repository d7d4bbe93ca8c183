package schedule_test

import (
	"testing"
	"time"

	"github.com/ductile/ductile/schedule"
)

// BenchmarkPlanOnTime: the common plan, one firing due after the last.
func BenchmarkPlanOnTime(b *testing.B) {
	r, err := schedule.ParseEvery("5m")
	if err != nil {
		b.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: r, Location: berlin, Jitter: time.Minute}}
	last := &schedule.Slot{Nominal: utc(2026, 11, 18, 9, 0, 0), Due: utc(2026, 11, 18, 9, 0, 0)}
	now := utc(2026, 11, 18, 9, 5, 30)
	for b.Loop() {
		s.Plan(last, now)
	}
}

// BenchmarkPlanLongGap: a 1s schedule, run_all, a year after its last
// firing (31 million missed).
func BenchmarkPlanLongGap(b *testing.B) {
	r, err := schedule.ParseEvery("1s")
	if err != nil {
		b.Fatal(err)
	}
	s := schedule.Schedule{Plugin: "p", Entry: schedule.Entry{ID: "x", Kind: schedule.KindEvery, Rule: r, Location: time.UTC, CatchUp: schedule.CatchUpRunAll}}
	last := &schedule.Slot{Nominal: utc(2025, 11, 18, 0, 0, 0), Due: utc(2025, 11, 18, 0, 0, 0)}
	now := utc(2026, 11, 18, 12, 0, 0).Add(400 * time.Millisecond)
	for b.Loop() {
		s.Plan(last, now)
	}
}
