package main_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchAPI runs ductile bench --api small: a real daemon, its API
// loaded from the bench process; every figure is there and every accepted
// job is in the daemon's queue.
func TestBenchAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon")
	}
	t.Parallel()
	env := cleanEnv(t)
	r := mustRun(t, env, "bench", "--api", "--clients", "1", "--clients", "4", "--requests", "50", "--rounds", "2", "--json")
	var res struct {
		Requests int `json:"requests_per_round"`
		Runs     []struct {
			Clients     int     `json:"clients"`
			P50MS       float64 `json:"p50_ms"`
			P99MS       float64 `json:"p99_ms"`
			MaxMS       float64 `json:"max_ms"`
			RequestsSec float64 `json:"requests_per_sec"`
		} `json:"runs"`
		Queued int64 `json:"queued"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.Equal(t, 50, res.Requests)
	require.Len(t, res.Runs, 4)
	for i, run := range res.Runs {
		require.Equal(t, []int{1, 1, 4, 4}[i], run.Clients)
		require.Positive(t, run.P50MS)
		require.LessOrEqual(t, run.P50MS, run.P99MS)
		require.LessOrEqual(t, run.P99MS, run.MaxMS)
		require.Positive(t, run.RequestsSec)
	}
	require.EqualValues(t, 1000+4*50, res.Queued)

	r = ductile(t, env, "bench", "--api", "--in-process")
	require.Equal(t, 2, r.code, r.stderr)
}
