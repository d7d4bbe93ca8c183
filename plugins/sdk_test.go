package plugins_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// The SDKs (plugins/lib) and their examples, run for real: the example
// plugins through pluginhost.Run, as the daemon runs them, and the SDKs'
// own functions.

func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python SDK and its example need it")
	}
}

// example is the unpacked example plugin name, as discovery loads it.
func example(t *testing.T, name string) *pluginhost.Plugin {
	t.Helper()
	reg, errs := pluginhost.Discover([]string{filepath.Join(unpacked, "examples")}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	p, ok := reg.Get(name)
	require.True(t, ok, name)
	return p
}

// runExample runs the example's count command with payload; stop, if set,
// is called with each control message and cancels the run when it says so.
func runExample(t *testing.T, name, payload string, stop func(pluginhost.ControlMessage) bool) (pluginhost.Result, []pluginhost.ControlMessage) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []pluginhost.ControlMessage
	req := pluginhost.Request{JobID: "job-" + name, Command: "count", Event: json.RawMessage(`{"type":"test.count","payload":` + payload + `}`)}
	res := pluginhost.Run(ctx, example(t, name), req, pluginhost.RunOptions{
		Timeout: time.Minute, Grace: 20 * time.Second, TraceID: "trace-1",
		Control: func(m pluginhost.ControlMessage) {
			got = append(got, m)
			if stop != nil && stop(m) {
				cancel()
			}
		},
	})
	t.Logf("%s: kind=%s exit=%d err=%q stdout=%q stderr=%q", name, res.Kind, res.ExitCode, res.Err, res.Stdout, res.Stderr)
	return res, got
}

// reported splits what a run reported into its progress values and its
// export items.
func reported(t *testing.T, msgs []pluginhost.ControlMessage) (progress []float64, items []events.Exported) {
	t.Helper()
	for _, m := range msgs {
		require.Empty(t, m.Refused)
		if m.Progress != nil && m.Progress.Progress != nil {
			progress = append(progress, *m.Progress.Progress)
		}
		if m.Export != nil {
			items = append(items, *m.Export)
		}
	}
	return progress, items
}

func TestPythonCountdownReportsProgressAndThreeExportItems(t *testing.T) {
	t.Parallel()
	needPython(t)
	res, msgs := runExample(t, "countdown", `{"from":4,"interval":0}`, nil)
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "counted down from 4", res.Response.Result)
	require.Equal(t, []pluginhost.Event{{Type: "countdown.done", Payload: json.RawMessage(`{"from":4,"run_id":"job-countdown"}`)}}, res.Response.Events)
	require.JSONEq(t, `{"last_from":4}`, string(res.Response.StateUpdates))

	progress, items := reported(t, msgs)
	require.Equal(t, []float64{0, 0.25, 0.5, 0.75, 1}, progress)
	require.Equal(t, []events.Exported{
		{Type: events.ExportText, Text: "counting down from 4", Description: "what this run does", Metadata: json.RawMessage(`{"from":4}`)},
		{Type: events.ExportURL, URL: "https://example.com/countdown/job-countdown", Description: "where a countdown would be shown", MIME: "text/html"},
		{Type: events.ExportBinaryURL, BinaryURL: "https://example.com/countdown/job-countdown.bin", Description: "its record", MIME: "application/octet-stream"},
	}, items)
	require.Equal(t, &events.Progressed{Progress: ptr(0.5), Message: "2 to go", Stage: "counting"}, msgs[4].Progress)
}

func TestPythonCountdownStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	needPython(t)
	// A long countdown, canceled once its three items are out.
	exports := 0
	res, msgs := runExample(t, "countdown", `{"from":100000,"interval":0.01}`, func(m pluginhost.ControlMessage) bool {
		if m.Export != nil {
			exports++
		}
		return exports == 3
	})
	require.Equal(t, events.OutcomeCanceled, res.Kind, res.Err)
	require.Equal(t, "canceled", res.Err, "it stopped on SIGTERM, well within its grace (no SIGKILL)")
	require.Equal(t, 0, res.ExitCode)
	require.JSONEq(t, `{"status":"error","error":"canceled","retry":false}`, string(res.Stdout))
	last := msgs[len(msgs)-1]
	require.NotNil(t, last.Progress)
	require.Equal(t, "canceled", last.Progress.Stage)
	require.Contains(t, last.Progress.Message, "stopped with")
}

func TestShellCountdownReportsProgressAndExportItems(t *testing.T) {
	t.Parallel()
	res, msgs := runExample(t, "countdown-sh", `{"from":2,"interval":0}`, nil)
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "counted down from 2", res.Response.Result)
	progress, items := reported(t, msgs)
	require.Equal(t, []float64{0, 0.5, 1}, progress)
	require.Equal(t, []events.Exported{
		{Type: events.ExportText, Text: "counting down from 2", Description: "what this run does", Metadata: json.RawMessage(`{"from":2}`)},
		{Type: events.ExportURL, URL: "https://example.com/countdown/job-countdown-sh", Description: "where a countdown would be shown", MIME: "text/html"},
	}, items)
}

func TestShellCountdownStopsWhenCanceled(t *testing.T) {
	t.Parallel()
	res, msgs := runExample(t, "countdown-sh", `{"from":100000,"interval":1}`, func(m pluginhost.ControlMessage) bool {
		return m.Export != nil // the first item: it is counting
	})
	require.Equal(t, events.OutcomeCanceled, res.Kind, res.Err)
	require.Equal(t, "canceled", res.Err, "it stopped on SIGTERM, well within its grace (no SIGKILL)")
	require.JSONEq(t, `{"status":"error","error":"canceled","retry":false}`, string(res.Stdout))
	last := msgs[len(msgs)-1]
	require.NotNil(t, last.Progress)
	require.Equal(t, "canceled", last.Progress.Stage)
}

// Strings reach the daemon as they were, whatever they hold, from each
// POSIX shell at hand.
func TestShellSDKEscapesStrings(t *testing.T) {
	t.Parallel()
	texts := []string{
		"plain", "", `a "quoted" \ backslash`, "tab\tnew\nline\r\n", "\x01\x1f control", "ending newline\n\n",
		"UTF-8: é ✓ 🎉", `{"looks":"like json"}`, "$HOME `date` $(echo no) %s %d", strings.Repeat("long ", 20000),
	}
	for _, shell := range []string{"sh", "dash", "bash", "busybox"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			continue
		}
		args := []string{path}
		if shell == "busybox" {
			args = append(args, "sh")
		}
		script := `. "$1"; shift; for t in "$@"; do ductile_export_text "$t" "$t"; ductile_progress "" "$t" "stage"; done; ductile_respond_ok "$1"`
		args = append(args, "-c", script, "sh", filepath.Join(unpacked, "lib", "ductile.sh"))
		args = append(args, texts...)
		lines, stdout := runWithControl(t, args)
		require.Len(t, lines, 2*len(texts), shell)
		for i, text := range texts {
			m, err := pluginhost.ParseControlLine(lines[2*i])
			require.NoError(t, err, "%s: %q", shell, lines[2*i])
			require.Equal(t, text, m.Export.Text, shell)
			require.Equal(t, text, m.Export.Description, shell)
			p, err := pluginhost.ParseControlLine(lines[2*i+1])
			if len(text) > pluginhost.MaxProgressMessage {
				require.ErrorContains(t, err, "over its cap", "the daemon refuses a message over its cap")
				continue
			}
			require.NoError(t, err, "%s: %q", shell, lines[2*i+1])
			require.Equal(t, text, p.Progress.Message, shell) // "": not given
			require.Equal(t, "stage", p.Progress.Stage, shell)
		}
		resp, err := pluginhost.ParseResponse(stdout)
		require.NoError(t, err, shell)
		require.Equal(t, texts[0], resp.Result, shell)
	}
}

// runWithControl runs args with a control channel on fd 3 and returns its
// lines and the process's stdout.
func runWithControl(t *testing.T, args []string) (lines [][]byte, stdout []byte) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "DUCTILE_CONTROL_FD=3")
	cmd.ExtraFiles = []*os.File{w}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	w.Close()
	all, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), errOut.String())
	for _, line := range strings.SplitAfter(string(all), "\n") {
		if line != "" {
			require.True(t, strings.HasSuffix(line, "\n"), "a whole line: %q", line)
			lines = append(lines, []byte(strings.TrimSuffix(line, "\n")))
		}
	}
	return lines, []byte(out.String())
}

// The Python SDK's own tests (plugins/testdata/sdk/test_ductile.py).
func TestPythonSDKUnit(t *testing.T) {
	t.Parallel()
	needPython(t)
	cmd := exec.Command("python3", "-m", "unittest", "-v", "test_ductile")
	cmd.Dir = filepath.Join("testdata", "sdk")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(unpacked, "lib"), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "OK")
}

func ptr(v float64) *float64 { return &v }
