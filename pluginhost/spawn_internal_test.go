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
