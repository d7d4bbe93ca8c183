package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchInProcessAndCLILatency runs the two measurements ductile bench
// added for the core's own cost: --in-process (a no-op step instead of a
// plugin process) and --cli-latency (a real daemon, jobs enqueued one at a
// time by real ductile plugin run processes), and requires every number.
func TestBenchInProcessAndCLILatency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons and a few dozen processes")
	}
	t.Parallel()
	env := cleanEnv(t)

	r := mustRun(t, env, "bench", "--in-process", "--jobs", "200", "--json")
	var in struct {
		InProcess       bool      `json:"in_process"`
		Jobs            int       `json:"jobs"`
		Workers         int       `json:"workers"`
		JobsPerSec      float64   `json:"jobs_per_sec"`
		RoundJobsPerSec []float64 `json:"round_jobs_per_sec"`
		CPUMSPerJob     float64   `json:"cpu_ms_per_job"`
		SpawnPerSec     *float64  `json:"spawn_per_sec"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
	require.True(t, in.InProcess)
	require.Equal(t, 200, in.Jobs)
	require.Positive(t, in.JobsPerSec)
	require.NotEmpty(t, in.RoundJobsPerSec)
	require.Positive(t, in.CPUMSPerJob)
	require.Nil(t, in.SpawnPerSec, "no raw spawn measurement in process")

	r = mustRun(t, env, "bench", "--cli-latency", "--jobs", "3", "--json")
	type latency struct {
		P50MS     float64 `json:"p50_ms"`
		P99MS     float64 `json:"p99_ms"`
		MaxMS     float64 `json:"max_ms"`
		DaemonCPU float64 `json:"daemon_cpu_ms_per_job"`
	}
	var cl struct {
		Jobs int     `json:"jobs"`
		CLI  latency `json:"cli"`
		Open latency `json:"open"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &cl), r.stdout)
	require.Equal(t, 3, cl.Jobs)
	for _, l := range []latency{cl.CLI, cl.Open} {
		require.Positive(t, l.P50MS, r.stdout)
		require.LessOrEqual(t, l.P50MS, l.P99MS)
		require.LessOrEqual(t, l.P99MS, l.MaxMS)
		require.GreaterOrEqual(t, l.DaemonCPU, 0.0)
	}

	r = ductile(t, env, "bench", "--cli-latency", "--in-process")
	require.Equal(t, 2, r.code, "--cli-latency measures one daemon as it runs: %s", r)
}
