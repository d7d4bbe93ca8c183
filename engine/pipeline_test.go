package engine_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
)

// TestStartPipeline: a run of one of the Engine's pipelines is recorded
// with its first job; an unknown name is a PipelineNotFoundError with the
// nearest name, a refusal of Allow stands (before the payload is checked),
// a payload that is not an object is a PayloadError, each before anything
// is appended; a pipeline the
// caller compiled runs too.
func TestStartPipeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("pipelines:\n  - name: fetch\n    steps:\n      - uses: echo.handle\n"), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	set, err := pipeline.Compile(cfg, nil)
	require.NoError(t, err)
	f := setup(t, set)

	head := f.head(t)
	var missing *engine.PipelineNotFoundError
	_, err = f.eng.StartPipeline(f.ctx, engine.StartPipeline{Name: "fecth", Trigger: events.TriggerAPI, By: events.ActorAPI})
	require.ErrorAs(t, err, &missing)
	require.Equal(t, []string{"fetch"}, missing.Known)
	require.Equal(t, "fetch", missing.Nearest)
	var bad *commands.PayloadError
	_, err = f.eng.StartPipeline(f.ctx, engine.StartPipeline{Name: "fetch", Payload: json.RawMessage(`[1]`), Trigger: events.TriggerAPI, By: events.ActorAPI})
	require.ErrorAs(t, err, &bad)
	refused := errors.New("too many")
	res, err := f.eng.StartPipeline(f.ctx, engine.StartPipeline{Name: "fetch", Payload: json.RawMessage(`[`), Trigger: events.TriggerAPI,
		By: events.ActorAPI, Allow: func(p *pipeline.Pipeline) error { return refused }})
	require.ErrorIs(t, err, refused, "Allow is asked before the payload is checked")
	require.Equal(t, set.Pipelines["fetch"], res.Pipeline)
	require.Equal(t, head, f.head(t))

	for _, req := range []engine.StartPipeline{
		{Name: "fetch", Trigger: events.TriggerAPI, By: events.ActorAPI},
		{Pipeline: set.Pipelines["fetch"], Payload: json.RawMessage(`{"url":"x"}`), Trigger: events.TriggerCLI, By: events.ActorCLI},
	} {
		res, err := f.eng.StartPipeline(f.ctx, req)
		require.NoError(t, err)
		evs, err := f.l.ReadStream(f.ctx, events.RunStream(res.RunID))
		require.NoError(t, err)
		require.Equal(t, events.PipelineRunStarted, evs[0].Type)
		var started events.RunStartedData
		require.NoError(t, json.Unmarshal(evs[0].Data, &started))
		require.Equal(t, req.Trigger, started.Trigger)
		require.Equal(t, res.JobID, started.JobID)
		j := f.job(t, res.JobID)
		require.Equal(t, "handle", j.Command)
		require.Equal(t, 7, j.MaxAttempts, "built with the Engine's config")
	}
}

// TestOnLedger: an Engine that checks only (no ledger, as a CLI's before
// it opens one) refuses to write; the same Engine on the ledger starts the
// run, sharing the pipeline runtime.
func TestOnLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("pipelines:\n  - name: fetch\n    steps:\n      - uses: echo.handle\n"), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	set, err := pipeline.Compile(cfg, nil)
	require.NoError(t, err)
	f := setup(t, set)
	checking := f.eng.OnLedger(nil)
	require.Same(t, f.eng.PipelineRuntime(), checking.PipelineRuntime())
	head := f.head(t)
	_, err = checking.StartPipeline(f.ctx, engine.StartPipeline{Name: "fetch", Trigger: events.TriggerCLI, By: events.ActorCLI})
	require.ErrorContains(t, err, "no ledger is open")
	_, err = checking.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", By: events.ActorCLI})
	require.ErrorContains(t, err, "no ledger is open")
	require.Equal(t, head, f.head(t))
	res, err := checking.OnLedger(f.l).StartPipeline(f.ctx, engine.StartPipeline{Name: "fetch", Trigger: events.TriggerCLI, By: events.ActorCLI})
	require.NoError(t, err)
	require.Equal(t, "handle", f.job(t, res.JobID).Command)
}
