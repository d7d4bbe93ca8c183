package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// The sweeper's timer, armed by the claim's wake-up, ends the attempt of a
// lease left to run out, with nothing else waking it.
func TestSweeperEndsAnExpiredLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := config.Default()
	render := config.DefaultPlugin()
	render.RunsOn = config.RunsRemote
	cfg.Plugins["render"] = render
	c, err := OpenCore(ctx, CoreOptions{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg})
	require.NoError(t, err)
	defer c.Close()
	old := c.Engine()
	fleet := engine.NewFleet(engine.FleetOptions{LeasePeriod: 300 * time.Millisecond})
	fleet.Watch(c.Projector)
	c.engine.Store(engine.New(engine.Options{Ledger: c.Ledger, Config: old.Config(), Applied: old.Applied(), Plugins: old.Plugins(),
		Pipelines: old.Pipelines(), Fleet: fleet}))
	s := startSweeper(ctx, c, c.logger)
	defer s.stop()

	e := c.Engine()
	w := events.Worker{Name: "w1"}
	require.NoError(t, e.RegisterWorker(ctx, events.WorkerRegisteredData{Name: "w1", Host: "h", Version: "test",
		Plugins: []events.WorkerPlugin{{Name: "render", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}, ConcurrencySafe: true}}}))
	enq, err := e.Enqueue(ctx, engine.Enqueue{Plugin: "render", Command: "handle", Payload: []byte(`{}`), By: events.ActorAPI})
	require.NoError(t, err)
	head, err := c.Ledger.LastSeq(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Projector.WaitFor(ctx, head))
	claim, err := e.Claim(ctx, w, nil, 0)
	require.NoError(t, err)
	require.NotNil(t, claim)

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = c.Ledger.Follow(wait, head, ledger.Filter{Stream: events.JobStream(enq.JobID)}, func(ev ledger.Event) error {
		if ev.Type == events.JobRecovered {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	if !errors.Is(err, ledger.ErrStopFollowing) {
		require.NoError(t, err, "the lease's expiry was recorded")
	}
	evs, err := c.Ledger.ReadStream(ctx, events.JobStream(enq.JobID))
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, j.Status)
	require.Equal(t, commands.LeaseExpiredReason, j.LastError)
}

// The same timer, armed by a topic message's claim, records the claim's
// expiry and, its attempts used up (max_attempts 1), its dead letter, with
// no claim and nothing else waking it.
func TestSweeperDeadLettersAnExpiredMessageClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Topics = map[string]config.TopicConfig{"work": {MaxAttempts: 1, Backoff: time.Second}}
	c, err := OpenCore(ctx, CoreOptions{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg})
	require.NoError(t, err)
	defer c.Close()
	s := startSweeper(ctx, c, c.logger)
	defer s.stop()

	e := c.Engine()
	m, err := e.Publish(ctx, engine.Publish{Topic: "work", Body: "x"})
	require.NoError(t, err)
	head, err := c.Ledger.LastSeq(ctx)
	require.NoError(t, err)
	claim, err := e.ClaimMessage(ctx, engine.MessageClaimRequest{Topic: "work", Worker: "w1", Lease: time.Second})
	require.NoError(t, err)
	require.NotNil(t, claim)

	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var ended ledger.Event
	_, err = c.Ledger.Follow(wait, head, ledger.Filter{Stream: events.MessageStream(m.ID)}, func(ev ledger.Event) error {
		if ev.Type == events.MessageClaimEnded {
			ended = ev
			return ledger.ErrStopFollowing
		}
		return nil
	})
	if !errors.Is(err, ledger.ErrStopFollowing) {
		require.NoError(t, err, "the claim's expiry was recorded")
	}
	require.Contains(t, string(ended.Data), `"status":"expired"`)
	require.Contains(t, string(ended.Data), `"follow_up_id"`)
}
