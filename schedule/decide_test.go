package schedule_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/schedule"
)

// TestDecide: if_running looks at the jobs of the entry itself; the poll
// guard at every poll job of the plugin, and has the last word.
func TestDecide(t *testing.T) {
	t.Parallel()
	running := schedule.Job{ID: "j1", Running: true}
	queued := schedule.Job{ID: "j2"}
	other := schedule.Job{ID: "cli-poll", Running: true} // a poll someone else enqueued
	for _, tc := range []struct {
		name      string
		command   string
		ifRunning schedule.IfRunning
		guard     int
		out       schedule.Outstanding
		want      schedule.Decision
	}{
		{"nothing outstanding", "poll", "", 0, schedule.Outstanding{},
			schedule.Decision{Action: schedule.ActionFire, Reason: "nothing of this schedule is queued or running"}},
		{"skip (the default)", "sync", "", 1, schedule.Outstanding{Entry: []schedule.Job{running}},
			schedule.Decision{Action: schedule.ActionSkip, Reason: "this schedule's job j1 is running (if_running skip)"}},
		{"skip counts a queued job too", "sync", schedule.IfRunningSkip, 1, schedule.Outstanding{Entry: []schedule.Job{queued}},
			schedule.Decision{Action: schedule.ActionSkip, Reason: "this schedule's job j2 is queued (if_running skip)"}},
		{"queue", "sync", schedule.IfRunningQueue, 1, schedule.Outstanding{Entry: []schedule.Job{running, queued}},
			schedule.Decision{Action: schedule.ActionQueue, Reason: "this schedule's 2 jobs are queued or running: j1 (running), j2 (queued); if_running queue adds another"}},
		{"cancel", "sync", schedule.IfRunningCancel, 1, schedule.Outstanding{Entry: []schedule.Job{running, queued}},
			schedule.Decision{Action: schedule.ActionCancel, Cancel: []string{"j1", "j2"}, Reason: "this schedule's 2 jobs are queued or running: j1 (running), j2 (queued): canceled for the new one (if_running cancel)"}},
		{"poll guard: another poll of the plugin", "poll", schedule.IfRunningQueue, 1, schedule.Outstanding{Polls: []schedule.Job{other}},
			schedule.Decision{Action: schedule.ActionSkip, Reason: "poll guard: plugin echo's poll job cli-poll is running, and max_outstanding_polls is 1"}},
		{"poll guard: only for poll", "sync", schedule.IfRunningSkip, 1, schedule.Outstanding{Polls: []schedule.Job{other}},
			schedule.Decision{Action: schedule.ActionFire, Reason: "nothing of this schedule is queued or running"}},
		{"poll guard over if_running queue", "poll", schedule.IfRunningQueue, 1, schedule.Outstanding{Entry: []schedule.Job{running}, Polls: []schedule.Job{running}},
			schedule.Decision{Action: schedule.ActionSkip, Reason: "poll guard: plugin echo's poll job j1 is running, and max_outstanding_polls is 1"}},
		{"poll guard of 2 lets if_running queue add one", "poll", schedule.IfRunningQueue, 2, schedule.Outstanding{Entry: []schedule.Job{running}, Polls: []schedule.Job{running}},
			schedule.Decision{Action: schedule.ActionQueue, Reason: "this schedule's job j1 is running; if_running queue adds another"}},
		{"poll guard of 2 full", "poll", schedule.IfRunningQueue, 2, schedule.Outstanding{Entry: []schedule.Job{running}, Polls: []schedule.Job{running, other}},
			schedule.Decision{Action: schedule.ActionSkip, Reason: "poll guard: plugin echo's 2 poll jobs are queued or running: j1 (running), cli-poll (running), and max_outstanding_polls is 2"}},
		{"cancel frees the guard of the jobs it cancels", "poll", schedule.IfRunningCancel, 1, schedule.Outstanding{Entry: []schedule.Job{running}, Polls: []schedule.Job{running}},
			schedule.Decision{Action: schedule.ActionCancel, Cancel: []string{"j1"}, Reason: "this schedule's job j1 is running: canceled for the new one (if_running cancel)"}},
		{"cancel does not free it of other polls: nothing is canceled", "poll", schedule.IfRunningCancel, 1, schedule.Outstanding{Entry: []schedule.Job{running}, Polls: []schedule.Job{running, other}},
			schedule.Decision{Action: schedule.ActionSkip, Reason: "poll guard: plugin echo's poll job cli-poll is running, and max_outstanding_polls is 1"}},
	} {
		s := schedule.Schedule{Plugin: "echo", MaxOutstandingPolls: tc.guard, Entry: schedule.Entry{ID: "x", Command: tc.command, IfRunning: tc.ifRunning}}
		d := s.Decide(tc.out)
		require.Equal(t, tc.want, d, tc.name)
		require.Equal(t, tc.want.Action != schedule.ActionSkip, d.Enqueues(), tc.name)
	}
}
