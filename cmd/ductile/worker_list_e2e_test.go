package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// TestWorkerListReadsTheFleet: with no daemon running, `worker list` reads
// the workers' registrations and the leases they hold from the ledger (in
// text and JSON); `system status` has a row per worker, and `job inspect`
// names the worker of the attempt.
func TestWorkerListReadsTheFleet(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "")
	ctx := context.Background()
	l := openLedger(t, w.state)

	r := w.run("worker", "list")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "no worker has registered")

	for _, name := range []string{"gpu1", "nas"} {
		_, err := l.Append(ctx, ledger.NewEvent{Stream: events.WorkerStream(name), ExpectedVersion: ledger.AnyVersion, Type: events.WorkerRegistered,
			Data: events.WorkerRegisteredData{Name: name, Host: name + ".lan", Version: "v-test", Plugins: []events.WorkerPlugin{{Name: "render", Version: "1",
				Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}}}}, Meta: ledger.Meta{Actor: events.ActorWorker}})
		require.NoError(t, err)
	}
	res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "render", Command: "handle", SubmittedBy: events.ActorCLI, MaxAttempts: 1, Now: time.Now()})
	require.NoError(t, err)
	_, err = commands.StartJob(ctx, l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Worker: &events.Worker{Name: "gpu1", PID: 9},
		LeasePeriod: 30 * time.Second, Now: time.Now()})
	require.NoError(t, err)
	_, err = projections.New(l, projections.Options{}).CatchUp(ctx)
	require.NoError(t, err)

	var fleet []struct {
		Name    string   `json:"name"`
		Host    string   `json:"host"`
		Plugins []string `json:"plugins"`
		Claims  int      `json:"claims"`
		Leases  []struct {
			JobID string `json:"job_id"`
		} `json:"leases"`
		LastSeen string `json:"last_seen"`
	}
	w.runJSON(0, &fleet, "worker", "list", "--json")
	require.Len(t, fleet, 2)
	require.Equal(t, "gpu1", fleet[0].Name)
	require.Equal(t, "gpu1.lan", fleet[0].Host)
	require.Equal(t, []string{"render"}, fleet[0].Plugins)
	require.Equal(t, 1, fleet[0].Claims)
	require.Equal(t, res.JobID, fleet[0].Leases[0].JobID)
	require.NotEmpty(t, fleet[0].LastSeen)
	require.Equal(t, "nas", fleet[1].Name)
	require.Equal(t, 0, fleet[1].Claims)

	r = w.run("worker", "list")
	require.Equal(t, 0, r.code, r.String())
	require.Regexp(t, `(?m)^gpu1\s+gpu1\.lan\s+v-test\s+render\s+1\s+\d{4}-`, r.stdout)
	require.Regexp(t, `(?m)^nas\s+nas\.lan\s+v-test\s+render\s+0\s+\d{4}-`, r.stdout)

	var status struct {
		Remote []struct {
			Name   string `json:"name"`
			Claims int    `json:"claims"`
		} `json:"remote_workers"`
	}
	w.runJSON(0, &status, "system", "status", "--no-health", "--json")
	require.Len(t, status.Remote, 2)
	require.Equal(t, 1, status.Remote[0].Claims)
	r = w.run("system", "status", "--no-health")
	require.Contains(t, r.stdout, "remote    gpu1 on gpu1.lan (v-test): 1 running, plugins render, last seen ")

	r = w.run("job", "inspect", res.JobID)
	require.Equal(t, 0, r.code, r.String())
	require.Regexp(t, `#1 running .* on gpu1`, r.stdout)
}
