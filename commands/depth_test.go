package commands_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/router"
)

// routesConfig routes echo's "again" back to echo and its "out" to sink,
// with a depth limit of limit.
func routesConfig(limit int) *config.Config {
	cfg := config.Default()
	cfg.Service.MaxRouteDepth = limit
	cfg.Routes = []config.Route{
		{From: "echo", EventType: "again", To: "echo", Command: "poll"},
		{From: "echo", EventType: "out", To: "sink", Command: "handle"},
	}
	return cfg
}

// completeAtDepth completes job p1 of plugin echo at depth, which emitted
// the events of types typs.
func completeAtDepth(t *testing.T, b *testBundle, depth, limit int, typs ...string) commands.CompleteResult {
	t.Helper()
	b.given(t, job("p1", func(e *events.Enqueued) { e.Depth = depth }).started(1).events()...)
	var evs []router.Event
	for _, typ := range typs {
		evs = append(evs, router.Event{Type: typ, Payload: json.RawMessage(`{}`)})
	}
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
		Routing: &commands.Routing{Config: routesConfig(limit), Plugin: "echo", Depth: depth, Events: evs}})
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, res.Status)
	return res
}

// succeededData reads p1's job.succeeded.
func succeededData(t *testing.T, b *testBundle) events.AttemptEnded {
	t.Helper()
	evs, err := b.l.ReadStream(b.ctx, events.JobStream("p1"))
	require.NoError(t, err)
	last := evs[len(evs)-1]
	require.Equal(t, events.JobSucceeded, last.Type)
	var d events.AttemptEnded
	require.NoError(t, json.Unmarshal(last.Data, &d))
	return d
}

// TestRouteDepthBoundary: a child at exactly the limit is enqueued one
// deeper than its parent; one past it is not, and the parent's success
// records why.
func TestRouteDepthBoundary(t *testing.T) {
	t.Parallel()
	t.Run("a root's child is depth 1", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := completeAtDepth(t, b, 0, 3, "again")
		require.Len(t, res.Children, 1)
		require.Equal(t, 1, b.fold(t, res.Children[0].JobID).Depth)
		require.Empty(t, res.Dropped)
		require.Empty(t, succeededData(t, b).DroppedRoutes)
	})
	t.Run("at the limit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := completeAtDepth(t, b, 2, 3, "again")
		require.Len(t, res.Children, 1)
		require.Equal(t, 3, b.fold(t, res.Children[0].JobID).Depth)
		require.Empty(t, res.Dropped)
	})
	t.Run("past the limit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := completeAtDepth(t, b, 3, 3, "again")
		require.Empty(t, res.Children)
		want := []events.DroppedRoute{{Plugin: "echo", Command: "poll", EventType: "again", Depth: 4, Limit: 3,
			Reason: "depth 4 would pass service.max_route_depth (3): the route may loop"}}
		require.Equal(t, want, res.Dropped)
		require.Equal(t, want, succeededData(t, b).DroppedRoutes)
		for _, ev := range b.since(t, 0) {
			if ev.Type == events.JobEnqueued {
				require.Equal(t, events.JobStream("p1"), ev.Stream, "only p1 is enqueued")
			}
		}
	})
}

// TestRouteDepthDropsOnlyWhatIsPastTheLimit: every route of a success
// makes children of one depth, so all of them go or all are dropped, and
// each dropped one is named.
func TestRouteDepthDropsOnlyWhatIsPastTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := completeAtDepth(t, b, 4, 5, "again", "out", "unrouted")
	require.Len(t, res.Children, 2, "both siblings at depth 5 go")
	for _, c := range res.Children {
		require.Equal(t, 5, b.fold(t, c.JobID).Depth)
	}
	require.Equal(t, []string{"unrouted"}, res.Unrouted)
	require.Empty(t, res.Dropped)

	b = setup(t)
	res = completeAtDepth(t, b, 5, 5, "again", "out")
	require.Empty(t, res.Children)
	got := succeededData(t, b).DroppedRoutes
	require.Len(t, got, 2)
	require.Equal(t, "echo", got[0].Plugin)
	require.Equal(t, "sink", got[1].Plugin)
	require.Equal(t, "out", got[1].EventType)
}

// TestRouteDepthMustMatchTheJob: routing prepared for another depth than
// the job's is refused, as for another plugin.
func TestRouteDepthMustMatchTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("p1", func(e *events.Enqueued) { e.Depth = 2 }).started(1).events()...)
	_, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
		Routing: &commands.Routing{Config: routesConfig(3), Plugin: "echo", Depth: 0, Events: []router.Event{{Type: "again"}}}})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
}
