package daemon_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// A daemon that stops while a remote worker holds a lease leaves that job
// running at its restart (recovery requeues only what its own workers
// ran), and the worker's completion with its fence applies afterwards.
func TestRestartKeepsLeasedJobsRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	cfg := config.Default()
	render := config.DefaultPlugin()
	render.RunsOn = config.RunsRemote
	cfg.Plugins["render"] = render

	c, err := daemon.OpenCore(ctx, daemon.CoreOptions{StateDir: state, Config: cfg})
	require.NoError(t, err)
	e := c.Engine()
	w := events.Worker{Name: "gpu-box", PID: 42}
	require.NoError(t, e.RegisterWorker(ctx, events.WorkerRegisteredData{Name: w.Name, Host: "gpu-box.lan", Version: "test",
		Plugins: []events.WorkerPlugin{{Name: "render", Version: "1", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}, ConcurrencySafe: true}}}))
	enq, err := e.Enqueue(ctx, engine.Enqueue{Plugin: "render", Command: "handle", Payload: []byte(`{"frame":9}`), By: events.ActorAPI})
	require.NoError(t, err)
	leased := enq.JobID
	local, err := commands.EnqueueJob(ctx, c.Ledger, commands.JobFor(c.Config(), "p", "poll", events.ActorCLI))
	require.NoError(t, err)
	_, err = commands.StartJob(ctx, c.Ledger, commands.Start{JobID: local.JobID, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	head, err := c.Ledger.LastSeq(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Projector.WaitFor(ctx, head))
	claim, err := e.Claim(ctx, w, nil, 0)
	require.NoError(t, err)
	require.NotNil(t, claim)
	require.Equal(t, leased, claim.JobID)
	require.NoError(t, c.Close()) // as if the daemon died

	c, err = daemon.OpenCore(ctx, daemon.CoreOptions{StateDir: state, Config: cfg})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, events.StatusQueued, status(t, c.Ledger, local.JobID), "its own worker's job is recovered")
	require.Equal(t, events.StatusRunning, status(t, c.Ledger, leased), "the leased job keeps running on its worker")

	done, err := c.Engine().CompleteRemote(ctx, claim.Fence, engine.Attempt{JobID: leased, Attempt: claim.Attempt, Worker: w,
		Kind: events.OutcomeOK, Response: []byte(`{"status":"ok"}`)})
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, done.Status)
	require.Equal(t, events.StatusSucceeded, status(t, c.Ledger, leased))
}
