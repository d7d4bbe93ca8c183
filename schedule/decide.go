package schedule

import (
	"fmt"
	"slices"
	"strings"
)

// Job is a queued or running job, as Decide sees it.
type Job struct {
	ID      string
	Running bool // else queued
}

// Outstanding is what is queued or running when a firing is due. Jobs
// with a cancel already requested are left out: they are on their way out.
type Outstanding struct {
	// Entry are the jobs this schedule entry enqueued.
	Entry []Job
	// Polls are the plugin's poll jobs, whoever enqueued them (this entry's
	// too, when it runs poll).
	Polls []Job
}

// Action is what a due firing does.
type Action string

// The actions Decide returns.
const (
	// ActionFire enqueues the firing's job: nothing of the entry is queued
	// or running.
	ActionFire Action = "fire"
	// ActionQueue enqueues it beside the entry's jobs still queued or
	// running (if_running: queue).
	ActionQueue Action = "queue"
	// ActionCancel requests the cancel of the entry's jobs still queued or
	// running, and enqueues it (if_running: cancel).
	ActionCancel Action = "cancel"
	// ActionSkip enqueues nothing; the firing is recorded as skipped.
	ActionSkip Action = "skip"
)

// Decision is what a due firing does, and why.
type Decision struct {
	Action Action
	// Cancel are the jobs to cancel, for ActionCancel.
	Cancel []string
	Reason string
}

// Enqueues reports whether the firing enqueues its job.
func (d Decision) Enqueues() bool { return d.Action != ActionSkip }

// Decide applies if_running, then the poll guard, to a due firing. The
// guard (spec §4.4) holds for a firing that runs poll: with as many of the
// plugin's poll jobs queued or running as max_outstanding_polls allows,
// the firing is skipped, whatever if_running says; jobs that if_running:
// cancel is about to cancel do not count.
func (s Schedule) Decide(out Outstanding) Decision {
	e := s.Entry
	d := Decision{Action: ActionFire, Reason: "nothing of this schedule is queued or running"}
	if len(out.Entry) > 0 {
		jobs := describe("this schedule's", "job", out.Entry)
		switch e.IfRunning {
		case IfRunningQueue:
			d = Decision{Action: ActionQueue, Reason: jobs + "; if_running queue adds another"}
		case IfRunningCancel:
			d = Decision{Action: ActionCancel, Reason: jobs + ": canceled for the new one (if_running cancel)"}
			for _, j := range out.Entry {
				d.Cancel = append(d.Cancel, j.ID)
			}
		default:
			return Decision{Action: ActionSkip, Reason: jobs + " (if_running skip)"}
		}
	}
	if e.Command != PollCommand {
		return d
	}
	limit := max(1, s.MaxOutstandingPolls)
	var polls []Job
	for _, j := range out.Polls {
		if !slices.Contains(d.Cancel, j.ID) {
			polls = append(polls, j)
		}
	}
	if len(polls) >= limit {
		return Decision{Action: ActionSkip, Reason: fmt.Sprintf("poll guard: %s, and max_outstanding_polls is %d", describe("plugin "+s.Plugin+"'s", "poll job", polls), limit)}
	}
	return d
}

// describe writes jobs for a reason: "<owner> <noun> X is running",
// "<owner> 2 <noun>s are queued or running: X (running), Y (queued)".
func describe(owner, noun string, jobs []Job) string {
	state := func(j Job) string {
		if j.Running {
			return "running"
		}
		return "queued"
	}
	if len(jobs) == 1 {
		return fmt.Sprintf("%s %s %s is %s", owner, noun, jobs[0].ID, state(jobs[0]))
	}
	parts := make([]string, len(jobs))
	for i, j := range jobs {
		parts[i] = fmt.Sprintf("%s (%s)", j.ID, state(j))
	}
	return fmt.Sprintf("%s %d %ss are queued or running: %s", owner, len(jobs), noun, strings.Join(parts, ", "))
}
