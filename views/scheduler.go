package views

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/schedule"
)

// ScheduleView is one schedule as ductile system scheduler shows it: what
// it last did, when it runs next and why, and what would hold it back.
type ScheduleView struct {
	Plugin    string `json:"plugin"`
	ID        string `json:"id"`
	Stream    string `json:"stream"`
	Command   string `json:"command"`
	When      string `json:"when"`
	Timezone  string `json:"timezone,omitempty"`
	CatchUp   string `json:"catch_up"`
	IfRunning string `json:"if_running"`
	// LastFired is the newest schedule.fired; nil when it never fired.
	LastFired *ScheduleFiring `json:"last_fired"`
	// LastSkipped is the newest schedule.skipped, if newer than LastFired.
	LastSkipped *ScheduleSkip `json:"last_skipped,omitempty"`
	// Next is its next firing with the reasons for its time (window,
	// jitter, not_on); nil when there is none, and Done says why.
	Next *ScheduleNext `json:"next"`
	Done string        `json:"done,omitempty"`
	// Due counts firings due now that the scheduler has not recorded yet
	// (none while it runs, but for an instant).
	Due int `json:"due"`
	// Open are the schedule's own jobs queued or running (if_running).
	Open []ScheduleJob `json:"open"`
	// PollGuard is the plugin's poll guard, for a schedule that runs poll.
	PollGuard *PollGuard `json:"poll_guard,omitempty"`
	// Would is what a firing due now would do (schedule.Decide).
	Would ScheduleDecision `json:"would"`
	// Breaker is the circuit breaker of the schedule's plugin command
	// (Breaker.Summary): an open one refuses the firings.
	Breaker string `json:"breaker"`
	// breakerProbeAt is an open breaker's probe time (BreakerNote).
	breakerProbeAt string
}

// ScheduleFiring is a recorded schedule.fired.
type ScheduleFiring struct {
	Slot       schedule.Slot   `json:"slot"`
	JobID      string          `json:"job_id"`
	Action     schedule.Action `json:"action"`
	RecordedAt time.Time       `json:"recorded_at"`
}

// ScheduleSkip is a recorded schedule.skipped.
type ScheduleSkip struct {
	Slot       schedule.Slot `json:"slot"`
	Count      int           `json:"count"`
	Reason     string        `json:"reason"`
	RecordedAt time.Time     `json:"recorded_at"`
}

// ScheduleNext is a schedule's next firing.
type ScheduleNext struct {
	schedule.Slot
	Why []string `json:"why"`
}

// ScheduleJob is a queued or running job.
type ScheduleJob struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// PollGuard is a plugin's poll jobs against max_outstanding_polls.
type PollGuard struct {
	Limit       int           `json:"limit"`
	Outstanding []ScheduleJob `json:"outstanding"`
}

// ScheduleDecision is schedule.Decision for people.
type ScheduleDecision struct {
	Action schedule.Action `json:"action"`
	Reason string          `json:"reason"`
	Cancel []string        `json:"cancel,omitempty"`
}

// ReadSchedules reads, for each schedule, its last firing from the ledger,
// plans its next one at now and fills in what if_running and the poll
// guard would do, in one read transaction.
func ReadSchedules(ctx context.Context, l *ledger.Ledger, schedules []schedule.Schedule, now time.Time) ([]ScheduleView, error) {
	out := make([]ScheduleView, 0, len(schedules))
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		breakers := map[string]Breaker{}
		if len(schedules) > 0 {
			err := queries.ListBreakers(conn, func(r queries.ListBreakersRow) error {
				breakers[r.Plugin+"/"+r.Command] = breakerOf(r)
				return nil
			})
			if err != nil {
				return err
			}
		}
		for _, s := range schedules {
			v, err := readSchedule(conn, s, now)
			if err != nil {
				return fmt.Errorf("read schedule %s: %w", s.Stream(), err)
			}
			v.Breaker = "breaker closed"
			if b, ok := breakers[s.Plugin+"/"+s.Entry.Command]; ok {
				v.Breaker = b.Summary()
				if b.State == "open" {
					v.breakerProbeAt = deref(b.ProbeAt)
				}
				if v.Would.Action != schedule.ActionSkip && b.refuses(now) {
					v.Would = ScheduleDecision{Action: schedule.ActionSkip, Reason: v.Breaker}
				}
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// BreakerNote is Breaker for a person reading LastSkipped beside it: ""
// when the breaker is closed, or when the last skip was this opening's
// refusal, which already says when it probes.
func (v ScheduleView) BreakerNote() string {
	switch {
	case v.Breaker == "breaker closed":
		return ""
	case v.breakerProbeAt != "" && v.LastSkipped != nil && strings.Contains(v.LastSkipped.Reason, v.breakerProbeAt):
		return ""
	}
	return v.Breaker
}

func readSchedule(conn *sqlite.Conn, s schedule.Schedule, now time.Time) (ScheduleView, error) {
	e := s.Entry
	v := ScheduleView{Plugin: s.Plugin, ID: e.ID, Stream: s.Stream(), Command: e.Command, When: e.When(),
		Timezone: e.Timezone, CatchUp: string(e.CatchUp), IfRunning: string(e.IfRunning), Open: []ScheduleJob{}}
	if v.CatchUp == "" {
		v.CatchUp = string(schedule.CatchUpSkip)
	}
	if v.IfRunning == "" {
		v.IfRunning = string(schedule.IfRunningSkip)
	}
	var last *schedule.Slot
	var open []string
	var lastSeq int64
	err := queries.ReadStreamLast(conn, s.Stream(), func(r queries.ReadStreamLastRow) error {
		var d struct {
			Slot events.Slot `json:"slot"`
			Open []string    `json:"open"`
		}
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			return err
		}
		slot := schedule.Slot(d.Slot)
		last, open, lastSeq = &slot, d.Open, r.Seq
		if r.Type == events.ScheduleSkipped {
			var k events.ScheduleSkippedData
			if err := json.Unmarshal([]byte(r.Data), &k); err != nil {
				return err
			}
			at, _ := time.Parse(ledger.TimeFormat, r.RecordedAt)
			v.LastSkipped = &ScheduleSkip{Slot: schedule.Slot(k.Slot), Count: k.Count, Reason: k.Reason, RecordedAt: at}
		}
		return nil
	})
	if err != nil {
		return v, err
	}
	if lastSeq > 0 {
		err = queries.ReadStreamLastOfType(conn, queries.ReadStreamLastOfTypeParams{Stream: s.Stream(), Type: events.ScheduleFired},
			func(r queries.ReadStreamLastOfTypeRow) error {
				var f events.ScheduleFiredData
				if err := json.Unmarshal([]byte(r.Data), &f); err != nil {
					return err
				}
				at, _ := time.Parse(ledger.TimeFormat, r.RecordedAt)
				v.LastFired = &ScheduleFiring{Slot: schedule.Slot(f.Slot), JobID: f.JobID, Action: schedule.Action(f.Action), RecordedAt: at}
				return nil
			})
		if err != nil {
			return v, err
		}
	}

	p := s.Plan(last, now)
	v.Due, v.Done = len(p.Fire), p.Done
	if p.Next != nil {
		v.Next = &ScheduleNext{Slot: p.Next.Slot, Why: append([]string{}, p.Next.Why...)}
	}

	var out schedule.Outstanding
	for _, id := range open {
		err := queries.GetJob(conn, id, func(r queries.GetJobRow) error {
			switch events.Status(r.Status) {
			case events.StatusQueued, events.StatusRunning:
				v.Open = append(v.Open, ScheduleJob{ID: id, Status: r.Status})
				out.Entry = append(out.Entry, schedule.Job{ID: id, Running: r.Status == string(events.StatusRunning)})
			}
			return nil
		})
		if err != nil {
			return v, err
		}
	}
	if e.Command == schedule.PollCommand {
		v.PollGuard = &PollGuard{Limit: max(1, s.MaxOutstandingPolls), Outstanding: []ScheduleJob{}}
		err := queries.ListOutstandingJobs(conn, queries.ListOutstandingJobsParams{Plugin: s.Plugin, Command: schedule.PollCommand},
			func(r queries.ListOutstandingJobsRow) error {
				v.PollGuard.Outstanding = append(v.PollGuard.Outstanding, ScheduleJob{ID: r.ID, Status: r.Status})
				out.Polls = append(out.Polls, schedule.Job{ID: r.ID, Running: r.Status == string(events.StatusRunning)})
				return nil
			})
		if err != nil {
			return v, err
		}
	}
	d := s.Decide(out)
	v.Would = ScheduleDecision{Action: d.Action, Reason: d.Reason, Cancel: d.Cancel}
	return v, nil
}
