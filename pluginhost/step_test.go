package pluginhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// TestStepRunsInProcess runs a plugin whose commands are an in-process step
// (ductile bench --in-process): the request is prepared, then encoded as
// for a process and handed to the step, whose output is classified as a
// process's stdout after a clean exit; no process is started.
func TestStepRunsInProcess(t *testing.T) {
	t.Parallel()
	var got []byte
	out, stepErr := []byte(`{"status":"ok","result":"done"}`), error(nil)
	p := &pluginhost.Plugin{Name: "inproc", Entrypoint: "/nonexistent/plugin", Step: func(_ context.Context, request []byte) ([]byte, error) {
		got = request
		return out, stepErr
	}}
	prepared := 0
	prepare := func() (pluginhost.Request, error) {
		prepared++
		return pluginhost.Request{Protocol: pluginhost.ProtocolVersion, JobID: "job-1", Command: "poll", DeadlineAt: time.Now()}, nil
	}
	run := func() pluginhost.Result {
		return pluginhost.RunPrepared(context.Background(), p, "poll", prepare, pluginhost.RunOptions{Timeout: time.Minute})
	}

	res := run()
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, 1, prepared)
	require.Zero(t, res.PID, "no process")
	require.Zero(t, res.ExitCode)
	require.NotNil(t, res.Response)
	require.Equal(t, "done", res.Response.Result)
	require.Equal(t, out, res.Stdout)
	var req struct {
		JobID   string `json:"job_id"`
		Command string `json:"command"`
	}
	require.NoError(t, json.Unmarshal(got, &req), "the step gets the request line a process would read")
	require.Equal(t, "job-1", req.JobID)

	out = []byte(`{"status":"error","error":"no","retry":false}`)
	res = run()
	require.Equal(t, events.OutcomeError, res.Kind)
	require.False(t, res.Retryable)
	require.Equal(t, "no", res.Err)

	out = []byte("not json")
	res = run()
	require.Equal(t, events.OutcomeProtocolError, res.Kind)

	out, stepErr = nil, errors.New("step failed")
	res = run()
	require.Equal(t, events.OutcomeError, res.Kind)
	require.True(t, res.Retryable)
	require.Equal(t, "step failed", res.Err)

	// A request that cannot be prepared never reaches the step.
	got = nil
	res = pluginhost.RunPrepared(context.Background(), p, "poll", func() (pluginhost.Request, error) {
		return pluginhost.Request{}, errors.New("start refused")
	}, pluginhost.RunOptions{Timeout: time.Minute})
	require.Equal(t, events.OutcomeCanceled, res.Kind)
	require.True(t, res.NotStarted, res.Err)
	require.Nil(t, got)
}
