//go:build linux && !ductile_portable

package pluginhost

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// Without pidfds (Linux before 5.3) the exit is watched through a pipe
// that a goroutine blocked in waitid closes: runs end as they do with
// pidfds, their timeouts and WaitDelay kept.
func TestRunWithoutPidfds(t *testing.T) {
	// Not parallel: no other test runs while pidfdWorks is swapped.
	works := pidfdWorks
	pidfdWorks = func() bool { return false }
	t.Cleanup(func() { pidfdWorks = works })
	dir, err := filepath.Abs(filepath.Join("testdata", "runner"))
	require.NoError(t, err)
	plugin := func(name string) *Plugin {
		return &Plugin{Name: name, Dir: dir, Entrypoint: filepath.Join(dir, name+".sh"), Manifest: &Manifest{Name: name}}
	}
	ctx := context.Background()
	req := Request{JobID: "job-1", Command: "poll"}

	res := Run(ctx, plugin("ok"), req, RunOptions{})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "done", res.Response.Result)

	res = Run(ctx, plugin("sleeper"), req, RunOptions{Timeout: 200 * time.Millisecond, Grace: 200 * time.Millisecond})
	require.Equal(t, events.OutcomeTimeout, res.Kind, res.Err)
	require.Equal(t, "timed out after 200ms", res.Err)

	res = Run(ctx, plugin("orphan"), req, RunOptions{WaitDelay: 10 * time.Second})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Less(t, res.Duration, 5*time.Second, "the child holding stdout is killed with its group")

	res = Run(ctx, plugin("exit3"), req, RunOptions{})
	require.Equal(t, events.OutcomeError, res.Kind)
	require.Equal(t, 3, res.ExitCode)
}

// A run's process is identified from the boot-time clock read around its
// fork: it must be what /proc shows, run after run (beyond the first few,
// which check it against /proc themselves).
func TestIdentityIsWhatProcShows(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("testdata", "runner"))
	require.NoError(t, err)
	p := &Plugin{Name: "ok", Dir: dir, Entrypoint: filepath.Join(dir, "ok.sh"), Manifest: &Manifest{Name: "ok"}}
	fromClock := 0
	for range 3 * ticksChecks {
		var spawned events.PluginProcess
		res := RunPrepared(context.Background(), p, "poll", func() (Request, error) {
			proc, err := ProcessOf(spawned.PGID) // not reaped before the run ends
			require.NoError(t, err)
			require.Equal(t, proc, spawned)
			return Request{JobID: "job-1", Command: "poll"}, nil
		}, RunOptions{OnSpawn: func(proc events.PluginProcess) { spawned = proc }})
		require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
		if ticksChecked.Load() >= ticksChecks {
			fromClock++
		}
	}
	require.False(t, ticksWrong.Load(), "the clock disagreed with /proc")
	require.Positive(t, fromClock, "identified from the clock")
}

func TestForkTicks(t *testing.T) {
	t.Parallel()
	const tick = int64(time.Second) / userHZ
	require.Equal(t, uint64(7), forkTicks(7*tick+tickMarginNanos, 8*tick-tickMarginNanos-1))
	require.Zero(t, forkTicks(8*tick-1000, 8*tick+1000), "straddles a tick")
	require.Zero(t, forkTicks(7*tick+tickMarginNanos-1, 7*tick+2*tickMarginNanos), "too near the tick before")
	require.Zero(t, forkTicks(0, 0), "no clock")
}
