package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// workerJobs is how many jobs the throughput tests push: E2E_WORKER_JOBS,
// else byDefault (0: the test is skipped, a measurement run only on
// demand).
func workerJobs(t *testing.T, byDefault int) int {
	t.Helper()
	v := os.Getenv("E2E_WORKER_JOBS")
	if v == "" {
		if byDefault == 0 {
			t.Skip("a measurement: set E2E_WORKER_JOBS=N (such as 1000) to run it")
		}
		return byDefault
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "E2E_WORKER_JOBS")
	require.Positive(t, n, "E2E_WORKER_JOBS")
	return n
}

// runJobs enqueues n jobs of the plugin remote from four clients at once,
// waits until every one succeeded, and requires that each started and
// succeeded once and that the ledger verifies. It returns the time from
// the first enqueue to the last success, and the events per job.
func (w *remoteWorld) runJobs(n int) (time.Duration, float64) {
	t := w.t
	t.Helper()
	began := time.Now()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < n; j += 4 {
				ids[j] = w.enqueue(map[string]any{"n": j})
			}
		}()
	}
	wg.Wait()
	done := 0 // ids[:done] have succeeded
	waitFor(t, 40*time.Second, "every job succeeded", func() bool {
		for done < n {
			if w.status(ids[done]) != "succeeded" {
				return false
			}
			done++
		}
		return true
	}, func() string { return strconv.Itoa(done) + " succeeded" })
	elapsed := time.Since(began)
	events := 0
	for _, id := range ids {
		status, types := w.job(id)
		events += len(types)
		require.Equal(t, "succeeded", status, id)
		require.Equal(t, 1, count(types, "job.started"), "%s: %v", id, types)
		require.Equal(t, 1, count(types, "job.succeeded"), "%s: %v", id, types)
	}
	mustRun(t, nil, w.args("ledger", "verify")...)
	return elapsed, float64(events) / float64(n)
}

// TestTheLocalDispatcherRunsTheSameJobs is the local side of the remote
// workers' figure (TestTwoWorkersRunARemotePluginsJobsEachOnce): the same
// plugin and job count, run by the daemon's own dispatcher with as many
// slots (max_workers 8: two workers of concurrency 4). A measurement,
// run with E2E_WORKER_JOBS=N; the figure is logged, never a pass/fail.
// The local dispatcher has no claim-to-start delay to compare: its claim
// is the start.
func TestTheLocalDispatcherRunsTheSameJobs(t *testing.T) {
	n := workerJobs(t, 0)
	plugins := writeRemotePlugin(t, t.TempDir(), workerScript)
	w := &remoteWorld{runsWorld: newRunsWorld(t, `
plugin_roots: ["`+plugins+`"]
service: {max_workers: 8}
api: {listen: 127.0.0.1:0}
plugins:
  remote: {runs_on: local, retry: {max_attempts: 3, backoff_base: 1s}}
`, "WORKER_NAME=local", "PIDFILE="+filepath.Join(t.TempDir(), "pid"))}
	elapsed, events := w.runJobs(n)
	t.Logf("%d jobs through the local dispatcher (max_workers 8) in %v: %.0f jobs/s; %.1f events per job",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), events)
}
