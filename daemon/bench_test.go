package daemon_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
)

// TestBenchInProcessSpawnsNothing runs ductile bench --in-process: every
// job goes the durable path (enqueue, start, completion, projections) with
// the built-in no-op step, no plugin process is started, and every number
// it reports is there. Not parallel, so that the children this process
// reaps meanwhile can only be the bench's.
func TestBenchInProcessSpawnsNothing(t *testing.T) {
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
	res, err := daemon.Bench(ctx, daemon.BenchOptions{Jobs: 400, InProcess: true, TempDir: tmp})
	require.NoError(t, err)
	require.Equal(t, before, children(), "no plugin process ran")

	require.True(t, res.InProcess)
	require.Equal(t, 400, res.Jobs)
	require.Equal(t, daemon.DefaultInProcessWorkers, res.Workers)
	require.Positive(t, res.JobsPerSec)
	require.Len(t, res.RoundJobsPerSec, daemon.DefaultBenchRounds)
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
