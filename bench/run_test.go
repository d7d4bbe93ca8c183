package bench_test

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/bench"
	"github.com/ductile/ductile/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunReportsEveryNumber(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon and spawns 2×50 processes")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tmp := t.TempDir()
	res, err := bench.Run(ctx, bench.Options{Jobs: 50, TempDir: tmp})
	require.NoError(t, err)
	require.Equal(t, 50, res.Jobs)
	// Unless told, both measurements use the daemon's default pool.
	require.Equal(t, config.Default().Service.MaxWorkers, res.Workers)
	require.Positive(t, res.JobsPerSec)
	require.Positive(t, res.SpawnPerSec)
	require.InDelta(t, res.JobsPerSec/res.SpawnPerSec, res.Ratio, 1e-9)
	// One ratio per round (the default count, 50 jobs being enough for it),
	// the overall one (their mean weighted by end-to-end time) within their range.
	require.Len(t, res.RoundRatios, bench.DefaultRounds)
	require.GreaterOrEqual(t, res.Ratio, slices.Min(res.RoundRatios)-1e-12)
	require.LessOrEqual(t, res.Ratio, slices.Max(res.RoundRatios)+1e-12)
	require.Positive(t, res.P50MS)
	require.LessOrEqual(t, res.P50MS, res.P99MS)
	require.Positive(t, res.EnqueueMS)
	require.Positive(t, res.CPUMSPerJob)
	require.Positive(t, res.SpawnCPUMSPerRun)
	// Every job is an enqueue, a start and a completion, so at most three
	// commits (group commit shares them); the durable enqueues need fsyncs,
	// and no flush happens without a commit to cover.
	require.Positive(t, res.CommitsPerJob)
	require.LessOrEqual(t, res.CommitsPerJob, 3.0)
	require.Positive(t, res.FsyncsPerJob)
	require.LessOrEqual(t, res.FsyncsPerJob, res.CommitsPerJob)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the scratch state directory is removed")
}

// TestRunInProcessSpawnsNothing runs ductile bench --in-process: every
// job goes the durable path (enqueue, start, completion, projections) with
// the built-in no-op step, no plugin process is started, and every number
// it reports is there. Not parallel, so that the children this process
// reaps meanwhile can only be the bench's.
func TestRunInProcessSpawnsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon through 400 jobs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tmp := t.TempDir()
	children := func() time.Duration {
		var r syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &r))
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	before := children()
	res, err := bench.Run(ctx, bench.Options{Jobs: 400, InProcess: true, TempDir: tmp})
	require.NoError(t, err)
	require.Equal(t, before, children(), "no plugin process ran")

	require.True(t, res.InProcess)
	require.Equal(t, 400, res.Jobs)
	require.Equal(t, bench.DefaultInProcessWorkers, res.Workers)
	require.Positive(t, res.JobsPerSec)
	require.Len(t, res.RoundJobsPerSec, bench.DefaultRounds)
	require.Zero(t, res.SpawnPerSec, "nothing is spawned, so nothing is compared")
	require.Zero(t, res.Ratio)
	require.Empty(t, res.RoundRatios)
	require.Positive(t, res.P50MS)
	require.LessOrEqual(t, res.P50MS, res.P99MS)
	require.Positive(t, res.CPUMSPerJob)
	require.Positive(t, res.CommitsPerJob)
	require.LessOrEqual(t, res.CommitsPerJob, 3.0)
	require.Positive(t, res.FsyncsPerJob)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the scratch state directory is removed")
}
