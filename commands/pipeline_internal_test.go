package commands

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/router"
)

// A job that is no pipeline step, whose events start no run and whose end
// fires no hook, costs the decision no decode of its response.
func TestAfterEndDecodesNoResponseItDoesNotRead(t *testing.T) {
	pl := &pipeline.Pipeline{Name: "watch", On: "file.found", Entry: "a",
		Nodes: map[string]*pipeline.Node{"a": {ID: "a", Kind: pipeline.KindUses, Plugin: "pa", Command: "handle"}}}
	hook := &pipeline.Pipeline{Name: "audit", OnHook: pipeline.HookCompleted, Entry: "a", Nodes: pl.Nodes}
	p := &Pipelines{Set: &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{"watch": pl, "audit": hook}}, Config: config.Default()}
	j := &Job{Enqueued: events.Enqueued{JobID: "j", Plugin: "other", Command: "handle"}}
	response := json.RawMessage(`{"status":"ok","result":{"big":"x"},"events":[{"type":"unrelated","payload":{}}]}`)
	routing := &Routing{Config: p.Config, Plugin: "other", Events: []router.Event{{Type: "unrelated", Payload: json.RawMessage(`{}`)}}}

	end := &jobEnd{Status: events.StatusSucceeded, Response: response, Emitted: routing.Events}
	evs, dropped, err := p.afterEnd(nil, j, end)
	require.NoError(t, err)
	require.Empty(t, evs)
	require.Empty(t, dropped)
	require.False(t, end.decoded, "the response was decoded by the decision")
	require.False(t, p.wantsResponse(false, routing))

	// It is wanted for a pipeline step, an event that starts a run, a hook
	// that fires.
	require.True(t, p.wantsResponse(true, routing))
	require.True(t, p.wantsResponse(false, &Routing{Config: p.Config, Plugin: "other", Events: []router.Event{{Type: "file.found"}}}))
	cfg := config.Default()
	pc := config.DefaultPlugin()
	pc.NotifyOnComplete = true
	cfg.Plugins["other"] = pc
	require.True(t, (&Pipelines{Set: p.Set, Config: cfg}).wantsResponse(false, routing))
}
