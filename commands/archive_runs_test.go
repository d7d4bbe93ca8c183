package commands_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// runsBundle is a ledger file with its projections and a recorded_at clock
// the test sets, which it can restart (close and open again).
type runsBundle struct {
	*carryBundle
	path      string
	projector *projections.Projector
}

func setupRuns(t *testing.T, start time.Time) *runsBundle {
	t.Helper()
	b := &runsBundle{carryBundle: &carryBundle{}, path: filepath.Join(t.TempDir(), "ductile.db")}
	b.clock.Store(start.UnixNano())
	b.testBundle = &testBundle{ctx: context.Background()}
	b.open(t)
	t.Cleanup(func() { b.close(t) })
	return b
}

func (b *runsBundle) open(t *testing.T) {
	t.Helper()
	l, err := ledger.Open(b.ctx, b.path, ledger.Options{
		Synchronous: "NORMAL", Now: func() time.Time { return time.Unix(0, b.clock.Load()).UTC() },
	})
	require.NoError(t, err)
	b.l = l
	b.projector = projections.New(l, projections.Options{})
	b.projector.Start(b.ctx)
	b.waitProjected = func(t *testing.T) {
		head, err := l.LastSeq(b.ctx)
		require.NoError(t, err)
		require.NoError(t, b.projector.WaitFor(b.ctx, head))
	}
}

func (b *runsBundle) close(t *testing.T) {
	t.Helper()
	if b.l == nil {
		return
	}
	b.projector.Stop()
	require.NoError(t, b.l.Close())
	b.l = nil
}

// restart closes the ledger and opens its file again, as a daemon restart
// would.
func (b *runsBundle) restart(t *testing.T) {
	t.Helper()
	b.close(t)
	b.open(t)
}

func current(pl *pipeline.Pipeline) *commands.Pipelines {
	return &commands.Pipelines{Set: &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{pl.Name: pl}}, Config: config.Default()}
}

// TestArchiveKeepsARunningRunAndItsVersion: versions v1, v2, v3 of a
// pipeline, v1 and v2 old enough to archive, and a run on v1 still going.
// The archive stops before the run's start (its row stays); v1's
// pipeline.compiled is archived but, the one event of its version's
// stream, stays readable: after a v4 appears and a restart, the run
// finishes on v1.
func TestArchiveKeepsARunningRunAndItsVersion(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := setupRuns(t, t0)
	v1 := graph("versioned", "a", uses("a", "pa", "b"), uses("b", "pb", "c"), uses("c", "pc", ""))
	v2 := graph("versioned", "a", uses("a", "other", ""))
	v3 := graph("versioned", "a", uses("a", "third", ""))

	run := startRun(t, b.testBundle, v1, `{}`)
	runOne(t, b.testBundle, run.JobID, ok(`"a"`), current(v1))
	jb := enqueuedAt(t, b.testBundle, run.RunID, "b")

	for day, v := range []*pipeline.Pipeline{v2, v3} {
		b.set(t0.Add(time.Duration(day+1) * 24 * time.Hour))
		other := startRun(t, b.testBundle, v, `{}`)
		runOne(t, b.testBundle, other.JobID, ok(`"x"`), current(v))
		require.NotNil(t, finished(t, b.testBundle, other.RunID))
	}
	b.waitProjected(t)

	b.set(t0.Add(10 * 24 * time.Hour))
	plan, _, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: t0.Add(5 * 24 * time.Hour)}.Run(b.ctx, b.l)
	require.NoError(t, err)
	require.Contains(t, plan.Lowered, "pipeline run "+run.RunID)
	b.waitProjected(t)
	row, err := views.ReadRun(b.ctx, b.l, run.RunID)
	require.NoError(t, err)
	require.Equal(t, events.RunRunning, row.Status)

	v4 := graph("versioned", "a", uses("a", "fourth", ""))
	fourth := startRun(t, b.testBundle, v4, `{}`) // a version recorded after the archive
	runOne(t, b.testBundle, fourth.JobID, ok(`"x"`), current(v4))
	b.restart(t)
	runOne(t, b.testBundle, jb, ok(`"b"`), current(v4))
	jc := b.fold(t, enqueuedAt(t, b.testBundle, run.RunID, "c"))
	require.Equal(t, "pc", jc.Plugin, "the run goes on on v1")
	runOne(t, b.testBundle, jc.JobID, ok(`"c"`), current(v4))
	fin := finished(t, b.testBundle, run.RunID)
	require.NotNil(t, fin)
	require.Equal(t, events.RunSucceeded, fin.Status)
	b.waitProjected(t)
	row, err = views.ReadRun(b.ctx, b.l, run.RunID)
	require.NoError(t, err)
	require.Equal(t, events.RunSucceeded, row.Status)
}

// TestArchiveStopsBeforeARunningRunsStart: a run on the current version
// whose outstanding job was enqueued after the cutoff keeps its start (and
// so its row) out of the archive, and finishes after a restart.
func TestArchiveStopsBeforeARunningRunsStart(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := setupRuns(t, t0)
	pl := graph("slow", "a", uses("a", "pa", "b"), uses("b", "pb", ""))
	filler := startRun(t, b.testBundle, graph("filler", "a", uses("a", "pf", "")), `{}`)
	runOne(t, b.testBundle, filler.JobID, ok(`"f"`), nil)

	// The running run's first job ends on day 6; its second is not run.
	b.set(t0.Add(2 * 24 * time.Hour))
	running := startRun(t, b.testBundle, pl, `{}`)
	b.set(t0.Add(6 * 24 * time.Hour))
	runOne(t, b.testBundle, running.JobID, ok(`"a"`), current(pl))
	b.waitProjected(t)

	b.set(t0.Add(10 * 24 * time.Hour))
	plan, _, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: t0.Add(5 * 24 * time.Hour)}.Run(b.ctx, b.l)
	require.NoError(t, err)
	require.Contains(t, plan.Lowered, "pipeline run "+running.RunID)
	b.waitProjected(t)
	_, err = views.ReadRun(b.ctx, b.l, running.RunID)
	require.NoError(t, err)
	_, err = views.ReadRun(b.ctx, b.l, filler.RunID)
	require.ErrorIs(t, err, views.ErrRunNotFound, "a run finished before the cut is archived")

	b.restart(t)
	runOne(t, b.testBundle, enqueuedAt(t, b.testBundle, running.RunID, "b"), ok(`"b"`), nil)
	require.Equal(t, events.RunSucceeded, finished(t, b.testBundle, running.RunID).Status)
}

// TestArchiveKeepsTheRowOfARunFinishedAfterTheCut: a run whose start moved
// to an archive but whose finish did not keeps its pipeline_runs row.
func TestArchiveKeepsTheRowOfARunFinishedAfterTheCut(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := setupRuns(t, t0)
	pl := graph("late", "a", uses("a", "pa", "b"), uses("b", "pb", ""))
	run := startRun(t, b.testBundle, pl, `{}`)
	runOne(t, b.testBundle, run.JobID, ok(`"a"`), current(pl))
	b.set(t0.Add(6 * 24 * time.Hour))
	runOne(t, b.testBundle, enqueuedAt(t, b.testBundle, run.RunID, "b"), ok(`"b"`), current(pl))
	require.NotNil(t, finished(t, b.testBundle, run.RunID))
	b.waitProjected(t)

	b.set(t0.Add(10 * 24 * time.Hour))
	plan, a, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: t0.Add(5 * 24 * time.Hour)}.Run(b.ctx, b.l)
	require.NoError(t, err)
	require.NotZero(t, a.LastSeq, plan.Lowered)
	b.waitProjected(t)
	row, err := views.ReadRun(b.ctx, b.l, run.RunID)
	require.NoError(t, err)
	require.Equal(t, events.RunSucceeded, row.Status)
	require.Less(t, row.StartedSeq, a.LastSeq+1, "its start is archived")
}
