package pipeline_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
)

// fakeHost records the jobs a Stepper asks for, naming them job-1, job-2…,
// and answers outputs from its map.
type fakeHost struct {
	requests []pipeline.JobRequest
	outputs  map[string]pipeline.JobOutput
}

func (h *fakeHost) Job(req pipeline.JobRequest) (pipeline.JobAnswer, error) {
	h.requests = append(h.requests, req)
	return pipeline.JobAnswer{JobID: fmt.Sprintf("job-%d", len(h.requests)), Fail: req.Fail}, nil
}

func (h *fakeHost) Output(id string) (pipeline.JobOutput, error) { return h.outputs[id], nil }

func (h *fakeHost) PluginConfig(string) json.RawMessage { return json.RawMessage(`{}`) }

const fanDoc = `
pipelines:
  - name: fan
    steps:
      - id: first
        uses: echo
        baggage: {web.url: payload.url}
      - id: both
        split:
          - id: left
            uses: sink
          - id: right
            uses: echo.poll
      - id: after
        uses: sink
`

// stepped compiles fanDoc and enters its first step as a run's start does.
func stepped(t *testing.T) (*pipeline.Stepper, *fakeHost) {
	t.Helper()
	set, err := pipeline.Compile(load(t, fanDoc), installed)
	require.NoError(t, err)
	h := &fakeHost{outputs: map[string]pipeline.JobOutput{}}
	s := &pipeline.Stepper{Pipeline: set.Pipelines["fan"], Host: h, State: &events.RunState{}}
	ended, err := s.Enter(s.Pipeline.Entry, pipeline.Input{Type: pipeline.EventRun, Payload: json.RawMessage(`{"url":"u"}`)}, nil, pipeline.Position{}, nil)
	require.NoError(t, err)
	require.False(t, ended)
	require.Len(t, h.requests, 1)
	first := h.requests[0]
	require.Equal(t, "first", first.Node.ID)
	require.JSONEq(t, `{"web":{"url":"u"}}`, string(first.Context), "the step's baggage claim")
	require.Equal(t, 1, s.State.Outstanding)

	// The first job succeeds: the split opens and each branch asks for its job.
	err = s.StepEnded(pipeline.StepEnd{Step: &events.PipelineStep{Node: "first"}, JobID: "job-1", Status: events.StatusSucceeded,
		Context: first.Context, Outputs: []pipeline.Input{{Type: pipeline.EventStepSucceeded, Payload: json.RawMessage(`{"result":1}`)}}})
	require.NoError(t, err)
	require.Len(t, h.requests, 3)
	require.Len(t, s.State.Splits, 1)
	split := s.State.Splits[0].ID
	for i, node := range []string{"left", "right"} {
		req := h.requests[1+i]
		require.Equal(t, node, req.Node.ID)
		require.Equal(t, []string{split}, req.At.Splits)
		require.Equal(t, []int{i}, req.At.Branches)
		require.Equal(t, 1, req.At.Depth, "one deeper than the first job")
		require.Equal(t, "job-1", req.At.Parent)
	}
	require.Equal(t, 2, s.State.Outstanding)
	return s, h
}

// branchEnded ends branch i's job of the open split.
func branchEnded(t *testing.T, s *pipeline.Stepper, i int, status events.Status) {
	t.Helper()
	split := s.State.Splits[0].ID
	end := pipeline.StepEnd{Step: &events.PipelineStep{Node: []string{"left", "right"}[i], Splits: []string{split}, Branches: []int{i}},
		JobID: fmt.Sprintf("job-%d", 2+i), Depth: 1, Status: status}
	if status == events.StatusSucceeded {
		end.Outputs = []pipeline.Input{{Type: pipeline.EventStepSucceeded, Payload: json.RawMessage(`{}`)}}
	} else {
		end.Error = "boom"
	}
	require.NoError(t, s.StepEnded(end))
}

// Once both branches succeed, the join's job gets every branch's result
// (read through the host), and once it ends, the run finishes with the
// results of its path ends.
func TestStepperJoinsBranchesAndFinishes(t *testing.T) {
	t.Parallel()
	s, h := stepped(t)
	h.outputs["job-2"] = pipeline.JobOutput{Plugin: "sink", Command: "handle", Result: json.RawMessage(`"L"`)}
	h.outputs["job-3"] = pipeline.JobOutput{Plugin: "echo", Command: "poll", Result: json.RawMessage(`"R"`)}
	branchEnded(t, s, 0, events.StatusSucceeded)
	fin, err := s.Finished("run")
	require.NoError(t, err)
	require.Nil(t, fin, "finished with a branch outstanding")
	branchEnded(t, s, 1, events.StatusSucceeded)

	require.Len(t, h.requests, 4)
	join := h.requests[3]
	require.Equal(t, "after", join.Node.ID)
	require.Equal(t, pipeline.EventJoin, join.Event)
	require.JSONEq(t, `{"branches":[
		{"branch":0,"node":"left","job_id":"job-2","status":"succeeded","result":"L","events":[]},
		{"branch":1,"node":"right","job_id":"job-3","status":"succeeded","result":"R","events":[]}]}`, string(join.Payload))
	require.Empty(t, s.State.Splits)
	require.Equal(t, 1, s.State.Outstanding)

	h.outputs["job-4"] = pipeline.JobOutput{Plugin: "sink", Command: "handle", Result: json.RawMessage(`"done"`)}
	err = s.StepEnded(pipeline.StepEnd{Step: &events.PipelineStep{Node: "after"}, JobID: "job-4", Depth: 2, Status: events.StatusSucceeded,
		Outputs: []pipeline.Input{{Type: pipeline.EventStepSucceeded, Payload: json.RawMessage(`{}`)}}})
	require.NoError(t, err)
	fin, err = s.Finished("run")
	require.NoError(t, err)
	require.Equal(t, &events.RunFinishedData{RunID: "run", Status: events.RunSucceeded, Results: []events.RunResult{
		{JobID: "job-4", Node: "after", Status: events.StatusSucceeded, Plugin: "sink", Command: "handle", Result: json.RawMessage(`"done"`)},
	}}, fin)
}

// A branch that dies fails the split (it does not continue on error): the
// join is not entered and the run finishes failed, with the split's reason.
func TestStepperFailedBranchFailsTheRun(t *testing.T) {
	t.Parallel()
	s, h := stepped(t)
	branchEnded(t, s, 0, events.StatusSucceeded)
	branchEnded(t, s, 1, events.StatusDead)
	require.Len(t, h.requests, 3, "the join was entered")
	require.Equal(t, events.SplitFailed, s.Progress.Closed[0].Status)
	fin, err := s.Finished("run")
	require.NoError(t, err)
	require.Equal(t, events.RunFailed, fin.Status)
	require.Equal(t, "split both: branch 1 (step right) ended dead: boom", fin.Error)
}
