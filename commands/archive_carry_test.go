package commands_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/schedule"
	"github.com/ductile/ductile/views"
)

// carryBundle is a ledger whose recorded_at clock the test sets, with its
// projections (an archive moves only what they have applied, and reads
// job_queue for which jobs are finished).
type carryBundle struct {
	*testBundle
	clock         atomic.Int64
	waitProjected func(t *testing.T) // until the projections applied the head
}

func setupCarry(t *testing.T, start time.Time) *carryBundle {
	t.Helper()
	b := &carryBundle{}
	b.clock.Store(start.UnixNano())
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{
		Synchronous: "NORMAL", Now: func() time.Time { return time.Unix(0, b.clock.Load()).UTC() },
	})
	require.NoError(t, err)
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	t.Cleanup(func() { p.Stop(); require.NoError(t, l.Close()) })
	b.testBundle = &testBundle{ctx: ctx, l: l}
	b.waitProjected = func(t *testing.T) {
		head, err := l.LastSeq(ctx)
		require.NoError(t, err)
		require.NoError(t, p.WaitFor(ctx, head))
	}
	return b
}

func (b *carryBundle) set(at time.Time) { b.clock.Store(at.UnixNano()) }

// lastSlot reads a schedule's state as the scheduler does (scheduler.load):
// its stream's newest event.
func (b *carryBundle) lastSlot(t *testing.T, s schedule.Schedule) (*schedule.Slot, int64) {
	t.Helper()
	var last *schedule.Slot
	var version int64
	require.NoError(t, b.l.Read(b.ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamLast(conn, s.Stream(), func(r queries.ReadStreamLastRow) error {
			recorded, err := events.ScheduleSlot([]byte(r.Data))
			slot := schedule.Slot(recorded)
			last, version = &slot, r.Version
			return err
		})
	}))
	return last, version
}

// fire plans s at now from its stream and records the plan.
func (b *carryBundle) fire(t *testing.T, s schedule.Schedule, now time.Time) commands.FireResult {
	t.Helper()
	last, version := b.lastSlot(t, s)
	res, err := commands.FireScheduleJobs(b.ctx, b.l, commands.FireSchedule{
		Schedule: s, Version: version, Plan: s.Plan(last, now), Now: now,
		Job: commands.Enqueue{MaxAttempts: 1, BackoffBase: time.Second},
	})
	require.NoError(t, err)
	return res
}

// TestArchiveMovesQuietStreamsAndTheirStateIsCarried is the reviewer's
// ledger: a plugin initialized once a year ago, a one-shot that fired, an
// hourly schedule, an open breaker, then 50 finished jobs over 50 days. An
// archive with a cutoff 300 days after the start moves all of it (a quiet
// stream no longer pins the cut), and every reader of a stream's newest
// event reads what it read before.
func TestArchiveMovesQuietStreamsAndTheirStateIsCarried(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := setupCarry(t, t0)

	b.given(t, ledger.NewEvent{Stream: events.PluginHealthStream("echo"), Type: events.PluginInitialized,
		Data: events.InitializedData{ConfigHash: "c0ffee"}, Meta: ledger.Meta{Actor: "daemon"}})

	oneShot := schedule.Schedule{Plugin: "echo", MaxOutstandingPolls: 1, Entry: schedule.Entry{ID: "once", Command: "sync",
		Kind: schedule.KindAt, At: t0.Add(time.Hour), CatchUp: schedule.CatchUpRunOnce, IfRunning: schedule.IfRunningQueue}}
	every, err := schedule.ParseEvery("1h")
	require.NoError(t, err)
	hourly := schedule.Schedule{Plugin: "echo", MaxOutstandingPolls: 1, Entry: schedule.Entry{ID: "hourly", Command: "sync",
		Kind: schedule.KindEvery, Rule: every, CatchUp: schedule.CatchUpRunOnce, IfRunning: schedule.IfRunningQueue}}
	firedAt := t0.Add(2 * time.Hour)
	b.set(firedAt)
	for _, s := range []schedule.Schedule{oneShot, hourly} {
		res := b.fire(t, s, firedAt)
		require.Len(t, res.Fired, 1, s.Stream())
		b.finish(t, res.Fired[0].JobID, true, firedAt)
	}

	// The breaker of echo poll opens after three scheduled failures.
	failAt := t0.Add(3 * time.Hour)
	b.set(failAt)
	for range 3 {
		b.runJob(t, "", events.ActorScheduler, false, failAt)
	}
	require.Equal(t, events.BreakerStateOpen, b.breaker(t).State)
	openBreaker := *b.breaker(t)

	for day := range 50 {
		b.set(t0.Add(time.Duration(day+1) * 24 * time.Hour))
		b.runJob(t, "", events.ActorCLI, true, t0.Add(time.Duration(day+1)*24*time.Hour))
	}
	b.waitProjected(t)
	head, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)

	b.set(t0.Add(365 * 24 * time.Hour))
	plan, a, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: t0.Add(300 * 24 * time.Hour)}.Run(b.ctx, b.l)
	require.NoError(t, err)
	require.Empty(t, plan.Lowered)
	require.Equal(t, head, plan.Through, "everything before the cutoff moves")
	require.Equal(t, int64(2+3+50), plan.JobStreams)
	require.Equal(t, head, a.LastSeq)

	// The plugin's init still reads as done, for the config it was.
	var hash string
	require.NoError(t, b.l.Read(b.ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamLastOfType(conn, queries.ReadStreamLastOfTypeParams{Stream: events.PluginHealthStream("echo"), Type: events.PluginInitialized},
			func(r queries.ReadStreamLastOfTypeRow) error { hash = r.Data; return nil })
	}))
	require.Contains(t, hash, `"config_hash":"c0ffee"`)

	// The one-shot does not fire again: its last firing is carried. (Had it
	// been lost, the plan would fire it, late, under catch_up run_once.)
	later := t0.Add(366 * 24 * time.Hour)
	last, version := b.lastSlot(t, oneShot)
	require.NotNil(t, last)
	require.Equal(t, int64(1), version)
	require.Empty(t, oneShot.Plan(last, later).Fire)
	require.Len(t, oneShot.Plan(nil, later).Fire, 1)
	require.Empty(t, b.fire(t, oneShot, later).Fired)

	// The hourly schedule catches up once (the missed firings skipped at
	// v2, one fired at v3), counting on from its archived version, though
	// the job its last firing names open has been archived.
	res := b.fire(t, hourly, later)
	require.Len(t, res.Skipped, 1)
	require.Len(t, res.Fired, 1)
	require.Equal(t, int64(3), res.Version)

	// The breaker is still open, and refuses a firing before its probe time.
	br := b.breaker(t)
	require.Equal(t, openBreaker, *br)
	adm := b.admit(t, "", failAt.Add(time.Minute))
	require.False(t, adm.Allow)
	require.Contains(t, adm.Reason, "breaker open")

	res2, err := b.l.Verify(b.ctx, nil)
	require.NoError(t, err)
	require.True(t, res2.OK, res2.Problem)
	check, err := b.l.CheckHead(b.ctx)
	require.NoError(t, err)
	require.True(t, check.OK(), check.Problem)
	checks, err := b.l.VerifyArchives(b.ctx)
	require.NoError(t, err)
	require.Len(t, checks, 1)
	require.True(t, checks[0].OK, checks[0].Problem)
}
