package router_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/router"
)

func TestRouteFansOutOnExactMatch(t *testing.T) {
	routes := []config.Route{
		{From: "a", EventType: "a.done", To: "b", Command: "handle"},
		{From: "a", EventType: "a.done", To: "c", Command: "notify"},
		{From: "a", EventType: "a.*", To: "never"},      // no wildcards
		{From: "x", EventType: "a.done", To: "neither"}, // other producer
	}
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	children, unrouted, err := router.Route(routes, "a", "parent-key", []router.Event{
		{Type: "a.done", Payload: json.RawMessage(`{"n":1}`)},
		{Type: "a.other"},
		{Type: "a.done", Payload: json.RawMessage(`{"n":2}`), DedupeKey: "own"},
	}, now)
	require.NoError(t, err)
	require.Equal(t, []string{"a.other"}, unrouted)
	require.Len(t, children, 4)

	require.Equal(t, []string{"b/handle", "c/notify", "b/handle", "c/notify"}, []string{
		children[0].Plugin + "/" + children[0].Command, children[1].Plugin + "/" + children[1].Command,
		children[2].Plugin + "/" + children[2].Command, children[3].Plugin + "/" + children[3].Command,
	})
	// One event, one core-assigned id, shared by its fan-out.
	require.Equal(t, children[0].EventID, children[1].EventID)
	require.NotEqual(t, children[0].EventID, children[2].EventID)
	require.Equal(t, "parent-key", children[0].DedupeKey, "inherits the parent's key")
	require.Equal(t, "own", children[2].DedupeKey, "the event's own key wins")

	var env events.Envelope
	require.NoError(t, json.Unmarshal(children[0].Envelope, &env))
	require.Equal(t, events.Envelope{Type: "a.done", Payload: json.RawMessage(`{"n":1}`), EventID: children[0].EventID,
		Source: "a", Timestamp: "2026-11-21T10:00:00Z"}, env)
}

func TestRouteWithNoRoutes(t *testing.T) {
	children, unrouted, err := router.Route(nil, "a", "", []router.Event{{Type: "x"}}, time.Now())
	require.NoError(t, err)
	require.Empty(t, children)
	require.Equal(t, []string{"x"}, unrouted)
}
