package dispatch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// The dispatcher never starts a job of a plugin placed runs_on: remote,
// though the plugin is installed here and the job is the oldest queued: a
// remote worker claims it.
func TestDispatcherLeavesRemoteJobsToWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, func(cfg *config.Config) {
		quick := config.DefaultPlugin()
		quick.RunsOn = config.RunsRemote
		cfg.Plugins["quick"] = quick
	})
	remote := b.enqueue("quick")
	local := b.enqueue("chatty")
	b.waitFor(map[string]string{local: "succeeded"})
	require.Equal(t, []string{"queued"}, b.statuses(remote), "left to remote workers")

	e := b.d.Engine()
	w := events.Worker{Name: "w1"}
	require.NoError(t, e.RegisterWorker(b.ctx, events.WorkerRegisteredData{Name: "w1", Host: "h", Version: "test",
		Plugins: []events.WorkerPlugin{{Name: "quick", Commands: []events.AppliedCommand{{Name: "poll", Type: "read"}}, ConcurrencySafe: true}}}))
	c, err := e.Claim(b.ctx, w, nil, 0)
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, remote, c.JobID)
	_, err = e.CompleteRemote(b.ctx, c.Fence, engine.Attempt{JobID: remote, Attempt: 1, Worker: w, Kind: events.OutcomeOK, Response: []byte(`{"status":"ok"}`)})
	require.NoError(t, err)
	b.waitFor(map[string]string{remote: "succeeded"})
}
