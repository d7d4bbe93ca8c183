package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/schedule"
)

func TestEveryFiresEachSlotOnceWithItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t, t0)
	sc := sched(newEntry(t, "1m"))
	b.run(t, sc)
	require.Equal(t, times(t0, "12:00:00"), b.fired(t, sc), "a firing due within schedule.Grace runs at start")

	b.advance(t, t0.Add(3*time.Minute+10*time.Second))
	require.Equal(t, times(t0, "12:00:00", "12:01:00", "12:02:00", "12:03:00"), b.fired(t, sc))
	for _, r := range b.records(t, sc) {
		require.Equal(t, r.fired.Slot.Nominal, r.fired.Slot.Due, "no jitter")
		require.Contains(t, []schedule.Action{schedule.ActionFire, schedule.ActionQueue}, schedule.Action(r.fired.Action))
	}
}

func TestEveryKind(t *testing.T) {
	t.Parallel()
	start := t0
	cron := newEntry(t, "*/5 * * * *")
	cron.ID = "cron"
	at := schedule.Entry{ID: "at", Command: "sync", Kind: schedule.KindAt, At: t0.Add(90 * time.Second), IfRunning: schedule.IfRunningQueue}
	after := schedule.Entry{ID: "after", Command: "sync", Kind: schedule.KindAfter, After: 2 * time.Minute, IfRunning: schedule.IfRunningQueue}
	b := setup(t, start)
	scs := []schedule.Schedule{sched(cron), sched(at), sched(after)}
	b.run(t, scs...)
	b.advance(t, t0.Add(11*time.Minute))

	require.Equal(t, times(t0, "12:00:00", "12:05:00", "12:10:00"), b.fired(t, scs[0]))
	require.Equal(t, []time.Time{t0.Add(90 * time.Second)}, b.fired(t, scs[1]))
	require.Equal(t, []time.Time{t0.Add(2 * time.Minute)}, b.fired(t, scs[2]))
	afterSlot := b.records(t, scs[2])[0].fired.Slot
	require.True(t, afterSlot.Start.Equal(start), "an after: firing records the start it counted from")

	// A restart re-arms after: (a new service start), never at:.
	restarted := t0.Add(20 * time.Minute)
	b.start = restarted
	b.restart(t, restarted)
	b.run(t, scs...)
	b.advance(t, restarted.Add(3*time.Minute))
	require.Len(t, b.fired(t, scs[1]), 1, "at: fired once for good")
	require.Equal(t, []time.Time{t0.Add(2 * time.Minute), restarted.Add(2 * time.Minute)}, b.fired(t, scs[2]))
}

func TestJitterIsBoundedAndStableAcrossARestart(t *testing.T) {
	t.Parallel()
	e := newEntry(t, "1m")
	e.Jitter = 30 * time.Second
	sc := sched(e)
	b := setup(t, t0)
	b.run(t, sc)
	b.advance(t, t0.Add(10*time.Minute))
	// Stopped, and started again by a new process, mid-way.
	b.restart(t, b.clock.Now())
	b.run(t, sc)
	b.advance(t, t0.Add(20*time.Minute))

	recs := b.records(t, sc)
	require.GreaterOrEqual(t, len(recs), 19)
	moved := 0
	for i, r := range recs {
		require.Equal(t, events.ScheduleFired, r.Type)
		slot := r.fired.Slot
		offset := slot.Due.Sub(slot.Nominal)
		require.LessOrEqual(t, offset.Abs(), 15*time.Second, "jitter within ±jitter/2")
		require.Equal(t, sc.Slot(slot.Nominal).Due, slot.Due, "the due time any process computes")
		if offset != 0 {
			moved++
		}
		if i > 0 {
			require.Equal(t, time.Minute, slot.Nominal.Sub(recs[i-1].fired.Slot.Nominal), "no firing lost or doubled by the restart")
		}
	}
	require.Greater(t, moved, len(recs)/2, "the jitter moves firings")
}

func TestOnlyBetweenAcrossMidnight(t *testing.T) {
	t.Parallel()
	e := newEntry(t, "hourly")
	w, err := schedule.ParseWindow("22:00-02:00")
	require.NoError(t, err)
	e.OnlyBetween = []schedule.Window{w}
	sc := sched(e)
	b := setup(t, time.Date(2026, 3, 2, 20, 30, 0, 0, time.UTC))
	b.run(t, sc)
	b.advance(t, time.Date(2026, 3, 3, 4, 30, 0, 0, time.UTC))
	next := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	require.Equal(t, append(times(t0, "22:00:00", "23:00:00"), times(next, "00:00:00", "01:00:00")...), b.fired(t, sc))
}

func TestDSTInBerlin(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	e := newEntry(t, "30 2 * * *")
	e.Location, e.Timezone = berlin, "Europe/Berlin"
	sc := sched(e)
	// Clocks go from 02:00 to 03:00 on 29 March 2026: 02:30 does not exist.
	b := setup(t, time.Date(2026, 3, 27, 12, 0, 0, 0, berlin))
	b.run(t, sc)
	b.advance(t, time.Date(2026, 3, 31, 12, 0, 0, 0, berlin))
	require.Equal(t, []time.Time{
		time.Date(2026, 3, 28, 2, 30, 0, 0, berlin).UTC(),
		time.Date(2026, 3, 29, 3, 0, 0, 0, berlin).UTC(), // right after the jump
		time.Date(2026, 3, 30, 2, 30, 0, 0, berlin).UTC(),
		time.Date(2026, 3, 31, 2, 30, 0, 0, berlin).UTC(),
	}, b.fired(t, sc))
}

func TestNotOn(t *testing.T) {
	t.Parallel()
	e := newEntry(t, "daily")
	e.NotOn = []time.Weekday{time.Saturday, time.Sunday}
	sc := sched(e)
	b := setup(t, t0) // Monday
	b.run(t, sc)
	b.advance(t, t0.Add(7*24*time.Hour))
	var days []time.Weekday
	for _, n := range b.fired(t, sc) {
		days = append(days, n.Weekday())
	}
	require.Equal(t, []time.Weekday{time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Monday}, days)
}

func TestCatchUpAfterAGap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode          schedule.CatchUp
		every         string
		gap           time.Duration
		fired, skiped int
	}{
		// Stopped at 12:05:30 until 12:17:30: 12 firings of a 1m schedule
		// missed, the latest 30s late (on time).
		{schedule.CatchUpSkip, "1m", 12 * time.Minute, 1, 11},
		// A 5m schedule stopped at 12:25:30 until 12:37:30: 12:30 and
		// 12:35 missed, the latest 2m30s late.
		{schedule.CatchUpSkip, "5m", 12 * time.Minute, 0, 2},
		{schedule.CatchUpRunOnce, "5m", 12 * time.Minute, 1, 1},
		{schedule.CatchUpRunAll, "5m", 12 * time.Minute, 2, 0},
		// A 1s schedule stopped for 10 minutes: at most 100 are run.
		{schedule.CatchUpRunAll, "1s", 10 * time.Minute, 100, 500},
	} {
		t.Run(string(tc.mode)+"/"+tc.every, func(t *testing.T) {
			t.Parallel()
			e := newEntry(t, tc.every)
			e.CatchUp = tc.mode
			sc := sched(e)
			b := setup(t, t0)
			b.run(t, sc)
			every, err := time.ParseDuration(tc.every)
			require.NoError(t, err)
			b.advance(t, t0.Add(5*every))
			before := len(b.records(t, sc))
			require.NotZero(t, before)

			// The daemon is stopped, and starts again after the gap.
			b.restart(t, t0.Add(5*every+tc.gap))
			b.run(t, sc)
			fired, skipped, skips := 0, 0, 0
			for _, r := range b.records(t, sc)[before:] {
				switch r.Type {
				case events.ScheduleFired:
					fired++
				case events.ScheduleSkipped:
					skipped += r.skipped.Count
					skips++
					require.NotEmpty(t, r.skipped.Reason)
				}
			}
			require.Equal(t, tc.fired, fired)
			require.Equal(t, tc.skiped, skipped)
			require.LessOrEqual(t, skips, 1, "one event for a run of skipped firings")
		})
	}
}

func TestIfRunning(t *testing.T) {
	t.Parallel()
	for _, mode := range []schedule.IfRunning{schedule.IfRunningSkip, schedule.IfRunningQueue, schedule.IfRunningCancel} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := newEntry(t, "1m")
			e.IfRunning = mode
			sc := sched(e)
			b := setup(t, t0)
			b.run(t, sc)
			// 12:00 at start: a job, left queued; at 12:01 it still is.
			b.advance(t, t0.Add(30*time.Second))
			recs := b.records(t, sc)
			require.Len(t, recs, 2)
			first := recs[0].fired.JobID
			second := recs[1]
			firstJob, err := b.l.ReadStream(b.ctx, events.JobStream(first))
			require.NoError(t, err)
			switch mode {
			case schedule.IfRunningSkip:
				require.Equal(t, events.ScheduleSkipped, second.Type)
				require.Contains(t, second.skipped.Reason, "if_running skip")
				require.Equal(t, []string{first}, second.skipped.Open)
			case schedule.IfRunningQueue:
				require.Equal(t, events.ScheduleFired, second.Type)
				require.Equal(t, schedule.ActionQueue, schedule.Action(second.fired.Action))
				require.Equal(t, []string{first, second.fired.JobID}, second.fired.Open)
			case schedule.IfRunningCancel:
				require.Equal(t, events.ScheduleFired, second.Type)
				require.Equal(t, schedule.ActionCancel, schedule.Action(second.fired.Action))
				require.Equal(t, []string{first}, second.fired.Canceled)
				require.Equal(t, []string{second.fired.JobID}, second.fired.Open)
				require.Equal(t, events.JobCanceled, firstJob[len(firstJob)-1].Type)
				require.Equal(t, second.RecordedAt, firstJob[len(firstJob)-1].RecordedAt, "canceled in the firing's transaction")
			}

			// Once the first job is done, the next firing fires whatever the mode.
			if mode != schedule.IfRunningCancel {
				_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: first, Now: t0})
				require.NoError(t, err)
				if mode == schedule.IfRunningQueue {
					_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: second.fired.JobID, Now: t0})
					require.NoError(t, err)
				}
			}
			b.advance(t, t0.Add(90*time.Second))
			third := b.records(t, sc)[2]
			if mode == schedule.IfRunningCancel {
				require.Equal(t, schedule.ActionCancel, schedule.Action(third.fired.Action))
			} else {
				require.Equal(t, schedule.ActionFire, schedule.Action(third.fired.Action), third.fired.Reason)
			}
		})
	}
}

func TestPollGuard(t *testing.T) {
	t.Parallel()
	e := newEntry(t, "1m")
	e.Command = schedule.PollCommand
	e.ID = "a"
	other := e
	other.ID = "b"
	sc, sc2 := sched(e), sched(other)
	b := setup(t, t0)
	// A poll job from the CLI is queued.
	cli, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorCLI, MaxAttempts: 1, Now: t0})
	require.NoError(t, err)
	require.NoError(t, b.p.WaitFor(b.ctx, cli.Seq))
	b.run(t, sc, sc2) // 12:00 is due
	for _, s := range []schedule.Schedule{sc, sc2} {
		recs := b.records(t, s)
		require.Len(t, recs, 1)
		require.Equal(t, events.ScheduleSkipped, recs[0].Type)
		require.Contains(t, recs[0].skipped.Reason, "poll guard")
		require.Contains(t, recs[0].skipped.Reason, cli.JobID)
	}

	// Once it is done, one of the two entries polls and holds the guard.
	_, err = commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: cli.JobID, Now: t0})
	require.NoError(t, err)
	b.advance(t, t0.Add(30*time.Second))
	require.Len(t, b.fired(t, sc), 1, "entry a fires")
	last := b.records(t, sc2)
	require.Contains(t, last[len(last)-1].skipped.Reason, "poll guard", "entry b is held by a's job")
}

func TestApplyRemovesAndChangesEntries(t *testing.T) {
	t.Parallel()
	a, c := newEntry(t, "1m"), newEntry(t, "1m")
	a.ID, c.ID = "a", "c"
	b := setup(t, t0)
	b.run(t, sched(a), sched(c))
	b.advance(t, t0.Add(2*time.Minute)) // 12:00, 12:01, 12:02
	require.Len(t, b.fired(t, sched(a)), 3)

	// c is removed; a now runs every 5 minutes, from its newest slot.
	a5 := newEntry(t, "5m")
	a5.ID = "a"
	b.apply(t, sched(a5))
	b.advance(t, t0.Add(12*time.Minute))
	require.Equal(t, times(t0, "12:00:00", "12:01:00", "12:02:00", "12:05:00", "12:10:00"), b.fired(t, sched(a5)))
	require.Len(t, b.fired(t, sched(c)), 3, "a removed entry stops")

	// Applying an empty set leaves the loop asleep with nothing to do.
	b.apply(t)
	b.advance(t, t0.Add(20*time.Minute))
	require.Len(t, b.fired(t, sched(a5)), 5)
}

func TestAStreamMovedUnderTheLoopIsReadAgain(t *testing.T) {
	t.Parallel()
	sc := sched(newEntry(t, "1m"))
	b := setup(t, t0)
	b.run(t, sc) // 12:00: the stream is at version 1
	// Another writer records the 12:01 firing first.
	n := t0.Add(30 * time.Second)
	fire := commands.FireSchedule{
		Schedule: sc, Version: 1, Plan: schedule.Plan{Fire: []schedule.Firing{sc.Slot(n)}},
		Job: commands.Enqueue{MaxAttempts: 1}, Now: n,
	}
	res, err := commands.FireScheduleJobs(b.ctx, b.l, fire)
	require.NoError(t, err)
	require.Len(t, res.Fired, 1)
	// The same decision from the same version is refused.
	_, err = commands.FireScheduleJobs(b.ctx, b.l, fire)
	require.ErrorIs(t, err, ledger.ErrVersionConflict)

	// The loop, which planned from version 1, is refused too, reads the
	// stream again and does not fire 12:01 a second time.
	b.advance(t, t0.Add(90*time.Second))
	require.Equal(t, times(t0, "12:00:00", "12:01:00", "12:02:00"), b.fired(t, sc))
}

func TestARefusedAdmissionIsRecordedAsSkipped(t *testing.T) {
	t.Parallel()
	sc := sched(newEntry(t, "1m"))
	b := setup(t, t0)
	var asked []string
	b.s.opts.Admit = func(_ *ledger.Tx, plugin, command, jobID string, _ time.Time) (bool, string, []ledger.NewEvent, error) {
		asked = append(asked, plugin+" "+command)
		return false, "circuit breaker open", nil, nil
	}
	b.run(t, sc)
	recs := b.records(t, sc)
	require.Len(t, recs, 1)
	require.Equal(t, events.ScheduleSkipped, recs[0].Type)
	require.Equal(t, "circuit breaker open", recs[0].skipped.Reason)
	require.Equal(t, []string{"echo sync"}, asked)
	last, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, last, "no job")
}
