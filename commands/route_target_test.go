package commands_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/router"
)

// TestRouteToAPluginThatCannotRunIsDropped: given a running job of echo,
// when it succeeds emitting events routed to echo and to sink while
// Routing.CanRun says sink cannot run, then only echo's child is
// enqueued, and the success records sink's as dropped with the reason (no
// depth limit: Limit 0), so no job is made only to die.
func TestRouteToAPluginThatCannotRunIsDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("p1").started(1).events()...)
	cannot := errors.New(`plugin "sink" was not loaded: entrypoint run.sh is not executable`)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
		Routing: &commands.Routing{Config: routesConfig(5), Plugin: "echo", Events: []router.Event{
			{Type: "again", Payload: json.RawMessage(`{}`)}, {Type: "out", Payload: json.RawMessage(`{}`)}},
			CanRun: func(plugin, command string) error {
				if plugin == "sink" {
					return cannot
				}
				return nil
			}}})
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, res.Status)
	require.Len(t, res.Children, 1)
	require.Equal(t, "echo", b.fold(t, res.Children[0].JobID).Plugin)
	want := []events.DroppedRoute{{Plugin: "sink", Command: "handle", EventType: "out", Depth: 1, Reason: cannot.Error()}}
	require.Equal(t, want, res.Dropped)
	require.Equal(t, want, succeededData(t, b).DroppedRoutes)
}
