package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/projections"
)

// TestRoutesAndPipelinesListenOnATopic: a route from topic:greet and a
// pipeline on topic:greet each take every message published to greet — a
// publisher's or a claim's follow-up — in the same append as the message:
// a JSON object body as the payload, any other body as {"body": …}.
func TestRoutesAndPipelinesListenOnATopic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
routes:
  - {from: "topic:greet", to: echo}
pipelines:
  - name: welcome
    on: "topic:greet"
    steps:
      - uses: echo.handle
`), 0o600))
	loaded, err := config.Load(path)
	require.NoError(t, err)
	require.Equal(t, []config.Route{{From: "topic:greet", EventType: config.TopicRouteEvent, To: "echo", Command: "handle"}}, loaded.Routes)
	set, err := pipeline.Compile(loaded, nil)
	require.NoError(t, err)
	f := setup(t, set)
	f.cfg.Routes = loaded.Routes
	p := projections.New(f.l, projections.Options{}) // claims read the projections
	p.Start(f.ctx)
	t.Cleanup(p.Stop)

	payloads := func(t *testing.T, after int64) (message ledger.Event, jobs []json.RawMessage, runs int) {
		t.Helper()
		_, err := f.l.ReadFrom(f.ctx, after, 100, ledger.Filter{}, func(ev ledger.Event) error {
			switch ev.Type {
			case events.MessagePublished:
				message = ev
			case events.JobEnqueued:
				require.Equal(t, message.RecordedAt, ev.RecordedAt, "one append with the message")
				var d events.Enqueued
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				require.Equal(t, "echo", d.Plugin)
				jobs = append(jobs, d.Payload)
			case events.PipelineRunStarted:
				runs++
			}
			return nil
		})
		require.NoError(t, err)
		return message, jobs, runs
	}

	head := f.head(t)
	m, err := f.eng.Publish(f.ctx, engine.Publish{Topic: "greet", Body: `{"name":"Ada"}`})
	require.NoError(t, err)
	msg, jobs, runs := payloads(t, head)
	require.Equal(t, events.MessageStream(m.ID), msg.Stream)
	require.Len(t, jobs, 2, "the route's job and the pipeline's first step")
	for _, p := range jobs {
		require.JSONEq(t, `{"name":"Ada"}`, string(p))
	}
	require.Equal(t, 1, runs)

	head = f.head(t)
	_, err = f.eng.Publish(f.ctx, engine.Publish{Topic: "greet", Body: "plain words"})
	require.NoError(t, err)
	_, jobs, _ = payloads(t, head)
	require.Len(t, jobs, 2)
	require.JSONEq(t, `{"body":"plain words"}`, string(jobs[0]))

	// A claim's follow-up to the topic fires them too.
	ask, err := f.eng.Publish(f.ctx, engine.Publish{Topic: "ask", Body: "who?"})
	require.NoError(t, err)
	c, err := f.eng.ClaimMessage(f.ctx, engine.MessageClaimRequest{Topic: "ask", Worker: "w"})
	require.NoError(t, err)
	require.NotNil(t, c)
	head = f.head(t)
	_, err = f.eng.FinishMessage(f.ctx, ask.ID, engine.MessageFence{Worker: "w", Fence: c.Fence}, engine.FollowUp{Status: "completed", Topic: "greet", Body: "Grace"})
	require.NoError(t, err)
	_, jobs, runs = payloads(t, head)
	require.Len(t, jobs, 2)
	require.Equal(t, 1, runs)

	// Other topics fire nothing.
	head = f.head(t)
	_, err = f.eng.Publish(f.ctx, engine.Publish{Topic: "greet.done", Body: "x"})
	require.NoError(t, err)
	_, jobs, runs = payloads(t, head)
	require.Empty(t, jobs)
	require.Zero(t, runs)
}
