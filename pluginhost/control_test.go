package pluginhost_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// collect runs fixture name with a Control that keeps every message.
func collect(t *testing.T, name string, opts pluginhost.RunOptions) (pluginhost.Result, []pluginhost.ControlMessage) {
	t.Helper()
	var got []pluginhost.ControlMessage
	opts.Control = func(m pluginhost.ControlMessage) { got = append(got, m) }
	return run(t, name, opts), got
}

func float(v float64) *float64 { return &v }

func TestControlLinesReachTheCallerInOrder(t *testing.T) {
	t.Parallel()
	res, got := collect(t, "control", pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "reported", res.Response.Result)

	require.Equal(t, []pluginhost.ControlMessage{
		{Line: 1, Progress: &events.Progressed{Progress: float(0.25), Message: "a quarter", Stage: "download"}},
		{Line: 2, Progress: &events.Progressed{Progress: float(0.5)}},
		// The blank line is skipped, and not counted.
		{Line: 3, Progress: &events.Progressed{Stage: "upload"}},
		{Line: 4, Export: &events.Exported{Type: events.ExportText, Text: `hello "world"`, Description: "a greeting", Metadata: json.RawMessage(`{"lang":"en"}`)}},
		{Line: 5, Export: &events.Exported{Type: events.ExportURL, URL: "https://example.com/r", MIME: "text/html"}},
		{Line: 6, Export: &events.Exported{Type: events.ExportBinary, Binary: []byte{0, 1, 2}, MIME: "application/octet-stream"}},
		// Written without a newline before the plugin exited.
		{Line: 7, Progress: &events.Progressed{Progress: float(1)}},
	}, got)
	require.Equal(t, 7, res.ControlLines)
	require.Zero(t, res.ControlRefused)
	requireGroupGone(t, res.PID)
}

func TestBadControlLinesAreRefusedAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	res, got := collect(t, "control_garbage", pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "garbage written", res.Response.Result)

	var refused []string
	for _, m := range got[:len(got)-1] {
		require.Nil(t, m.Progress, "line %d", m.Line)
		require.Nil(t, m.Export, "line %d", m.Line)
		refused = append(refused, m.Refused)
	}
	want := []string{
		`control line 1 refused: not a JSON object: "not json"`,
		`control line 2 refused: not a JSON object: "[1,2]"`,
		`control line 3 refused: progress must be a number from 0 to 1, not "1.5": "{\"progress\":1.5}"`,
		`control line 4 refused: progress must be a number from 0 to 1, not "\"half\""`,
		`control line 5 refused: no "progress", "message", "stage" or "export" in it`,
		`control line 6 refused: export: type "pdf" is not one of text, url, binary_url, binary`,
		`control line 7 refused: export: an item of type url needs "url"`,
		`control line 8 refused: export: binary must be base64 (standard alphabet, padded): illegal base64 data at input byte 3`,
		`control line 9 refused: export: metadata must be a JSON object`,
		`control line 10 refused: not a control object: unexpected end of JSON input`,
		`control line 11 refused: longer than 1048576 bytes`,
	}
	require.Len(t, refused, len(want))
	for i, w := range want {
		require.True(t, strings.HasPrefix(refused[i], w), "refusal %d: %q, want it to start with %q", i+1, refused[i], w)
	}
	require.Less(t, len(refused[10]), 400, "a refusal quotes only the start of the line")

	last := got[len(got)-1]
	require.Equal(t, 12, last.Line)
	require.Equal(t, &events.Progressed{Progress: float(0.9), Message: "still heard"}, last.Progress)
	require.Equal(t, 1, res.ControlLines)
	require.Equal(t, 11, res.ControlRefused)
}

func TestPluginsIgnoringTheControlChannelRunUnchanged(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"ok", "control_closed"} {
		res, got := collect(t, name, pluginhost.RunOptions{})
		require.Equal(t, events.OutcomeOK, res.Kind, "%s: %s", name, res.Err)
		require.Empty(t, got, name)
		require.Zero(t, res.ControlLines+res.ControlRefused, name)
	}
	// The bundled echo plugin, in each of its modes, ends as it always has.
	echo := echoPlugin(t)
	for mode, want := range map[string]events.Outcome{"ok": events.OutcomeOK, "error": events.OutcomeError, "protocol_error": events.OutcomeProtocolError, "crash": events.OutcomeError} {
		var got []pluginhost.ControlMessage
		res := pluginhost.Run(context.Background(), echo, pluginhost.Request{JobID: "j", Command: "poll", Config: json.RawMessage(`{"mode":"` + mode + `"}`)},
			pluginhost.RunOptions{Timeout: 10 * time.Second, Control: func(m pluginhost.ControlMessage) { got = append(got, m) }})
		require.Equal(t, want, res.Kind, "mode %s: %s", mode, res.Err)
		require.Empty(t, got, mode)
	}
}

func TestThePluginGetsItsControlChannelAndRunInItsEnvironment(t *testing.T) {
	// Not parallel: it sets the test process's environment.
	t.Setenv(pluginhost.EnvRunID, "inherited-run")     // never passed on as it is
	t.Setenv(pluginhost.EnvTraceID, "inherited-trace") // nor this
	res := pluginhost.Run(context.Background(), fixture(t, "control_env"), pluginhost.Request{JobID: "job-7", Command: "poll"}, pluginhost.RunOptions{TraceID: "trace-9"})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "fd=3 run=job-7 trace=trace-9 open=yes", res.Response.Result)

	res = pluginhost.RunPrepared(context.Background(), fixture(t, "control_env"), "poll", func() (pluginhost.Request, error) {
		return pluginhost.Request{JobID: "job-8", Command: "poll"}, nil
	}, pluginhost.RunOptions{RunID: "job-8"})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "fd=3 run=job-8 trace=unset open=yes", res.Response.Result)
}

func TestAProcessHoldingTheControlChannelDoesNotDelayTheResult(t *testing.T) {
	t.Parallel()
	// WaitDelay is far longer than the test may take: were the control
	// channel read to its end, the run would wait for the held child.
	res, got := collect(t, "control_held", pluginhost.RunOptions{WaitDelay: time.Hour})
	m := regexp.MustCompile(`held=(\d+)`).FindStringSubmatch(res.Response.Result)
	require.NotNil(t, m, res.Response.Result)
	held, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = unix.Kill(held, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(held, &ws, 0, nil) // re-parented to this subreaper
	})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Less(t, res.Duration, time.Hour)
	require.Equal(t, []pluginhost.ControlMessage{{Line: 1, Progress: &events.Progressed{Progress: float(1), Message: "done"}}}, got,
		"what the plugin wrote before it exited is read after its exit")
	requireGroupGone(t, res.PID)
}

func TestAPluginStoppedOnRequestEndsCanceled(t *testing.T) {
	t.Parallel()
	// The plugin answers {"status":"error","error":"canceled"} and exits 1
	// on SIGTERM: the run is canceled, not failed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := pluginhost.Run(ctx, fixture(t, "control_cancel"), pollRequest(), pluginhost.RunOptions{
		Timeout: time.Minute, Grace: 30 * time.Second,
		Control: func(m pluginhost.ControlMessage) { cancel() }, // it runs: cancel it
	})
	require.Equal(t, events.OutcomeCanceled, res.Kind, res.Err)
	require.Equal(t, "canceled", res.Err, "it exited on SIGTERM, within its grace")
	require.Equal(t, 1, res.ExitCode)
	require.False(t, res.Retryable)
	requireGroupGone(t, res.PID)
}

func TestParseControlLine(t *testing.T) {
	t.Parallel()
	m, err := pluginhost.ParseControlLine([]byte(`  {"progress":0,"export":{"type":"binary_url","binary_url":"https://x/y.bin","metadata":null}} `))
	require.NoError(t, err)
	require.Equal(t, pluginhost.ControlMessage{
		Progress: &events.Progressed{Progress: float(0)},
		Export:   &events.Exported{Type: events.ExportBinaryURL, BinaryURL: "https://x/y.bin"},
	}, m, "one line may carry both; null metadata is none")

	_, err = pluginhost.ParseControlLine([]byte(`{"export":{"type":"text","text":""}}`))
	require.NoError(t, err, "an empty text is a text")
	_, err = pluginhost.ParseControlLine([]byte(`{"progress":null,"message":"only a message"}`))
	require.NoError(t, err)
	_, err = pluginhost.ParseControlLine([]byte(`{"progress":-0.01}`))
	require.ErrorContains(t, err, "from 0 to 1")
	_, err = pluginhost.ParseControlLine([]byte(`{"message":"` + strings.Repeat("m", pluginhost.MaxProgressMessage+1) + `"}`))
	require.ErrorContains(t, err, "over its cap of 4096")
	_, err = pluginhost.ParseControlLine([]byte(`{"stage":"` + strings.Repeat("s", pluginhost.MaxProgressStage+1) + `"}`))
	require.ErrorContains(t, err, "over its cap of 256")
	_, err = pluginhost.ParseControlLine([]byte("{\"message\":\"\xff\"}"))
	require.ErrorContains(t, err, "UTF-8")
}

func TestEveryControlLineOfAFloodIsReadInOrder(t *testing.T) {
	t.Parallel()
	n := 0
	res := run(t, "control_flood", pluginhost.RunOptions{Control: func(m pluginhost.ControlMessage) {
		n++
		if m.Line != n || m.Progress == nil || m.Progress.Message != "line "+strconv.Itoa(n) {
			t.Errorf("message %d: %+v", n, m)
		}
	}})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, 20000, n)
	require.Equal(t, 20000, res.ControlLines)
}

// BenchmarkControlLines runs a plugin that writes 20,000 progress lines on
// its control channel, and reports this process's CPU per line read,
// parsed and handed on (the plugin's own CPU is not counted).
func BenchmarkControlLines(b *testing.B) {
	p := fixture(b, "control_flood")
	b.ReportAllocs()
	cpu0 := selfCPU(b)
	lines := 0
	for b.Loop() {
		res := pluginhost.Run(context.Background(), p, pollRequest(), pluginhost.RunOptions{Control: func(pluginhost.ControlMessage) { lines++ }})
		if res.Kind != events.OutcomeOK {
			b.Fatalf("kind %s: %s", res.Kind, res.Err)
		}
	}
	b.ReportMetric(float64((selfCPU(b)-cpu0).Nanoseconds())/float64(lines), "cpu-ns/line")
}

// BenchmarkParseControlLine parses the commonest line, a progress.
func BenchmarkParseControlLine(b *testing.B) {
	line := []byte(`{"progress":0.41250,"message":"line 8250"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pluginhost.ParseControlLine(line); err != nil {
			b.Fatal(err)
		}
	}
}
