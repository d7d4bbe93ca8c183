package projections

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

func TestPipelineJobReadsOnlyTheTopLevelPosition(t *testing.T) {
	step := &events.PipelineStep{Run: "r", Pipeline: "p", Hash: "h", Node: "n", Splits: []string{"s"}, Branches: []int{1}}
	encode := func(d events.Enqueued) []byte {
		b, err := json.Marshal(d)
		require.NoError(t, err)
		return b
	}
	// A payload and an event that say "pipeline":{ are not a pipeline step.
	fooled := encode(events.Enqueued{JobID: "j", Plugin: "x", Command: "c", Payload: json.RawMessage(`{"pipeline":{"run":"r"}}`),
		Event: json.RawMessage(`{"type":"t","payload":{"pipeline":{"run":"r"}}}`)})
	got, err := pipelineJob(fooled)
	require.NoError(t, err)
	require.Nil(t, got)

	real := encode(events.Enqueued{JobID: "j", Plugin: "x", Command: "c", Payload: json.RawMessage(`{"pipeline":{"run":"other"}}`),
		ParentJobID: "parent", Pipeline: step, Context: json.RawMessage(`{"a":{"b":1}}`)})
	got, err = pipelineJob(real)
	require.NoError(t, err)
	require.Equal(t, &enqueuedStep{JobID: "j", ParentJobID: "parent", Pipeline: step, Context: json.RawMessage(`{"a":{"b":1}}`)}, got)

	// Data the fast walk gives up on (a \u escape) decodes the same.
	escaped := encode(events.Enqueued{JobID: "<j>", Plugin: "x", Command: "c", Pipeline: step})
	got, err = pipelineJob(escaped)
	require.NoError(t, err)
	require.Equal(t, &enqueuedStep{JobID: "<j>", Pipeline: step}, got)

	// A job that is no pipeline step is not decoded at all.
	got, err = pipelineJob(encode(events.Enqueued{JobID: "j", Plugin: "x", Command: "c", Payload: json.RawMessage(`{"k":1}`)}))
	require.NoError(t, err)
	require.Nil(t, got)
}
