package daemon_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// TestCoreRunsOnlyTheJobsItIsGiven: a Core holds the lock as the CLI, records
// no config.applied and runs no init; opening it runs Starting, then
// recovers a job a stopped process left running; it dispatches nothing by itself, and RunJob runs the
// one job it is given to its end.
func TestCoreRunsOnlyTheJobsItIsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	plugin := writeLifecyclePlugin(t, root, "p", "poll", "init")
	cfg := lifecycleConfig(root, map[string]string{"p": "ok"})
	pc := cfg.Plugins["p"]
	pc.Retry.MaxAttempts = 2
	cfg.Plugins["p"] = pc

	c, err := daemon.OpenCore(ctx, daemon.CoreOptions{StateDir: state, Config: cfg})
	require.NoError(t, err)
	h, err := daemon.Holder(state)
	require.NoError(t, err)
	require.Equal(t, daemon.RoleCLI, h.Role)
	enqueue := func() string {
		res, err := commands.EnqueueJob(ctx, c.Ledger, commands.JobFor(c.Config(), "p", "poll", events.ActorCLI))
		require.NoError(t, err)
		return res.JobID
	}
	orphan, other := enqueue(), enqueue()
	_, err = commands.StartJob(ctx, c.Ledger, commands.Start{JobID: orphan, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	require.NoError(t, c.Close()) // as if the process running it died

	started := false
	c, err = daemon.OpenCore(ctx, daemon.CoreOptions{StateDir: state, Config: cfg, Starting: func(ctx context.Context, c *daemon.Core) error {
		require.Equal(t, events.StatusRunning, status(t, c.Ledger, orphan), "Starting runs before recovery")
		require.NotNil(t, c.Engine())
		started = true
		return nil
	}})
	require.NoError(t, err)
	defer c.Close()
	require.True(t, started)
	require.Equal(t, events.StatusQueued, status(t, c.Ledger, orphan), "recovered")
	_, applied, err := daemon.LastApplied(ctx, c.Ledger)
	require.NoError(t, err)
	require.False(t, applied, "a core records no config.applied")
	require.Zero(t, runsOf(t, plugin, "init"), "a core runs no init")

	require.NoError(t, c.RunJob(ctx, orphan))
	require.Equal(t, events.StatusSucceeded, status(t, c.Ledger, orphan))
	require.Equal(t, events.StatusQueued, status(t, c.Ledger, other), "nothing dispatches the others")
	require.Equal(t, 1, runsOf(t, plugin, "other"))
}

func status(t *testing.T, l *ledger.Ledger, id string) events.Status {
	t.Helper()
	evs, err := l.ReadStream(context.Background(), events.JobStream(id))
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	return j.Status
}
