package pluginhost_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// echoPlugin discovers the bundled echo plugin unpacked by TestMain.
func echoPlugin(t *testing.T) *pluginhost.Plugin {
	t.Helper()
	reg, errs := pluginhost.Discover([]string{bundledRoot}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	p, ok := reg.Get("echo")
	require.True(t, ok)
	return p
}

func runEcho(t *testing.T, req pluginhost.Request, opts pluginhost.RunOptions) pluginhost.Result {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	opts.Grace = 200 * time.Millisecond
	res := pluginhost.Run(context.Background(), echoPlugin(t), req, opts)
	t.Logf("echo %s: kind=%s exit=%d err=%q stdout=%q", req.Command, res.Kind, res.ExitCode, res.Err, res.Stdout)
	return res
}

func TestEchoOK(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"poll", "health"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			res := runEcho(t, pluginhost.Request{JobID: "j", Command: cmd}, pluginhost.RunOptions{})
			require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
			require.Equal(t, "echo "+cmd, res.Response.Result)
			require.Len(t, res.Response.Events, 1)
			require.Equal(t, "echo."+cmd, res.Response.Events[0].Type)
			require.JSONEq(t, `{}`, string(res.Response.Events[0].Payload))
			require.JSONEq(t, `{"last_command":"`+cmd+`","runs":1}`, string(res.Response.StateUpdates))
		})
	}
}

func TestEchoHandleCarriesPayloadAndCountsRuns(t *testing.T) {
	t.Parallel()
	payload := `{"msg":"quote \" brace } comma , bracket ]","nested":{"runs":99,"list":[1,{"a":"b"}]},"empty":""}`
	res := runEcho(t, pluginhost.Request{
		JobID:   "j",
		Command: "handle",
		Config:  json.RawMessage(`{"mode":"ok","other":{"mode":"error"}}`),
		State:   json.RawMessage(`{"nested":{"runs":1000},"last_command":"poll","runs":41}`),
		Context: json.RawMessage(`{"origin":{"mode":"crash"}}`),
		Event:   json.RawMessage(`{"type":"upstream.done","payload":` + payload + `,"dedupe_key":"k"}`),
	}, pluginhost.RunOptions{})

	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "echo handle", res.Response.Result)
	require.Equal(t, "echo.handle", res.Response.Events[0].Type)
	require.JSONEq(t, payload, string(res.Response.Events[0].Payload))
	require.JSONEq(t, `{"last_command":"handle","runs":42}`, string(res.Response.StateUpdates))
}

func TestEchoModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode      string
		kind      events.Outcome
		retryable bool
		exit      int
		err       string
	}{
		{mode: "error", kind: events.OutcomeError, retryable: true, exit: 0, err: "failing on purpose"},
		{mode: "protocol_error", kind: events.OutcomeProtocolError, retryable: true, exit: 0, err: "not a JSON object"},
		{mode: "crash", kind: events.OutcomeError, retryable: true, exit: 3, err: "exit 3: echo: crashing on purpose"},
		{mode: "hang", kind: events.OutcomeTimeout, retryable: true, exit: -1, err: "timed out after 500ms"},
		{mode: "bogus", kind: events.OutcomeError, retryable: false, exit: 0, err: "unknown mode"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			timeout := 10 * time.Second
			if tc.mode == "hang" {
				timeout = 500 * time.Millisecond
			}
			res := runEcho(t, pluginhost.Request{
				JobID: "j", Command: "poll", Config: json.RawMessage(`{"mode":"` + tc.mode + `"}`),
			}, pluginhost.RunOptions{Timeout: timeout})
			require.Equal(t, tc.kind, res.Kind)
			require.Equal(t, tc.retryable, res.Retryable)
			require.Equal(t, tc.exit, res.ExitCode)
			require.Contains(t, res.Err, tc.err)
			requireGroupGone(t, res.PID)
		})
	}
	t.Run("error response says retry true", func(t *testing.T) {
		t.Parallel()
		res := runEcho(t, pluginhost.Request{JobID: "j", Command: "poll", Config: json.RawMessage(`{"mode":"error"}`)}, pluginhost.RunOptions{})
		require.NotNil(t, res.Response.Retry)
		require.True(t, *res.Response.Retry)
	})
}

func TestEchoRejectsUnknownCommandAndProtocol(t *testing.T) {
	t.Parallel()
	res := runEcho(t, pluginhost.Request{JobID: "j", Command: "sync"}, pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeError, res.Kind)
	require.False(t, res.Retryable)

	res = runEcho(t, pluginhost.Request{Protocol: 1, JobID: "j", Command: "poll"}, pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeError, res.Kind)
	require.Equal(t, pluginhost.ExitConfig, res.ExitCode)
	require.False(t, res.Retryable)
	require.Contains(t, res.Err, "unsupported protocol 1")
}
