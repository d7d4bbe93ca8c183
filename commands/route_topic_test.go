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

// A route to topic:<name> publishes the emitted event's payload as a
// message in the completion's own append; a route from that topic back to
// the plugin makes a job one route deeper, so such a loop ends at
// service.max_route_depth like any route loop.
func TestARouteToATopicPublishesTheEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := config.Default()
	cfg.Service.MaxRouteDepth = 3
	cfg.Routes = []config.Route{
		{From: "echo", EventType: "echo.said", To: "topic:said", Command: "handle"},
		{From: "topic:said", EventType: config.TopicRouteEvent, To: "echo", Command: "handle"},
	}
	pipelines := &commands.Pipelines{Config: cfg}
	complete := func(id string, depth int) commands.CompleteResult {
		t.Helper()
		b.given(t, job(id, func(e *events.Enqueued) { e.Depth = depth }).started(1).events()...)
		mark := b.mark(t)
		res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: id, Attempt: 1, Outcome: outOK, Now: now, Pipelines: pipelines,
			Routing: &commands.Routing{Config: cfg, Plugin: "echo", Depth: depth, Events: []router.Event{{Type: "echo.said", Payload: json.RawMessage(`{"text":"hi"}`)}}}})
		require.NoError(t, err)
		evs := b.since(t, mark)
		for _, ev := range evs[1:] {
			require.Equal(t, evs[0].RecordedAt, ev.RecordedAt, "one append")
		}
		return res
	}

	res := complete("p1", 0)
	require.Len(t, res.Published, 1)
	m := res.Published[0]
	require.Equal(t, "said", m.Topic)
	require.JSONEq(t, `{"text":"hi"}`, m.Body)
	require.Equal(t, "echo", m.Producer)
	require.Equal(t, 1, m.Depth)
	require.Contains(t, string(m.Metadata), `"job_id":"p1"`)
	var enqueued []events.Enqueued
	for _, ev := range b.since(t, 0) {
		if ev.Type == events.JobEnqueued {
			var d events.Enqueued
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			if d.SourceEventID == m.ID {
				enqueued = append(enqueued, d)
			}
		}
	}
	require.Len(t, enqueued, 1, "the route from the topic took the message")
	require.Equal(t, 1, enqueued[0].Depth)
	require.JSONEq(t, `{"text":"hi"}`, string(enqueued[0].Payload))

	// A route to a topic one past the limit is dropped, as any route is.
	res = complete("p3", 3)
	require.Len(t, res.Published, 0, "a route past the limit is dropped")
	require.Len(t, res.Dropped, 1)
}
