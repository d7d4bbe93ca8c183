package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// logView is one entry of job logs --json.
type logView struct {
	Attempt int    `json:"attempt"`
	At      string `json:"at"`
	Stream  string `json:"stream"`
	Level   string `json:"level"`
	Message string `json:"message"`
}

// job logs showed nothing while an attempt ran (stderr reached the ledger
// only with the outcome) and had no timestamps. Now stderr lines are
// recorded as they come, job logs --follow prints them while the plugin
// runs (here it waits for the test, which waits for the line) and ends
// once the job is finished, and every line has the time it was read.
func TestJobLogsFollowsARunningJob(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  unruly: {retry: {max_attempts: 1}}
`)
	d := w.startDaemon()
	fifo := filepath.Join(w.scratch, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	var run runView
	w.runJSON(0, &run, "plugin", "run", "unruly", "--payload", fmt.Sprintf(`{"mode":"chatty","fifo":%q}`, fifo), "--json")

	follow := start(t, nil, w.args("job", "logs", run.JobID, "--follow")...)
	stamp := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`
	line, _ := follow.waitLine(t, 0, func(l string) bool { return strings.Contains(l, "chatty: waiting for") })
	require.Regexp(t, `^`+stamp+` #1 stderr chatty: waiting for `+regexp.QuoteMeta(fifo)+`$`, line)
	// The plugin is still blocked on the FIFO: the line came while it ran.
	in := w.inspect(run.JobID)
	require.Equal(t, "running", in.Job.Status)
	var written struct {
		Attempt int `json:"attempt"`
		Line    int `json:"line"`
		Lines   []struct {
			At   string `json:"at"`
			Text string `json:"text"`
		} `json:"lines"`
	}
	in.event(t, "job.stderr_written", &written)
	require.Equal(t, 1, written.Attempt)
	require.Equal(t, 1, written.Line)
	require.Len(t, written.Lines, 1)

	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the plugin opens it
	require.NoError(t, err)
	_, err = f.WriteString("the test\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, 0, follow.wait(t), "--follow ends when the job is finished")
	lines, _ := follow.snapshot()
	require.Len(t, lines, 4, "%q", lines)
	for i, want := range []string{
		`#1 stderr chatty: waiting for ` + regexp.QuoteMeta(fifo),
		`#1 stderr chatty: released by the test`,
		`#1 stderr chatty: a last line without a newline`,
		`#1 info   chatty: logged`,
	} {
		require.Regexp(t, `^`+stamp+` `+want+`$`, lines[i])
	}

	// The same, at once, as JSON; the times are in order.
	w.waitSettled(run.JobID)
	var logs []logView
	w.runJSON(0, &logs, "job", "logs", run.JobID, "--json")
	require.Len(t, logs, 4)
	var last time.Time
	for _, l := range logs {
		at, err := time.Parse(time.RFC3339Nano, l.At)
		require.NoError(t, err, l.At)
		require.False(t, at.Before(last), "%v", logs)
		last = at
	}
	require.Equal(t, logView{Attempt: 1, At: logs[3].At, Stream: "plugin", Level: "info", Message: "chatty: logged"}, logs[3])
	// --follow --json prints one object per line.
	r := w.run("job", "logs", run.JobID, "--follow", "--json")
	require.Equal(t, 0, r.code, r.String())
	var followed []logView
	for _, s := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		var l logView
		require.NoError(t, json.Unmarshal([]byte(s), &l), s)
		followed = append(followed, l)
	}
	require.Equal(t, logs, followed)

	w.stopDaemon(d)
	w.replayAndVerify()
}

// Lines of an attempt's stderr that were not streamed (past the streaming
// bound, or recorded before streaming existed) come from its outcome, at
// the time the attempt ended, after those that were, each line once.
func TestJobLogsMergesStreamedAndRecordedStderr(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	l := openLedger(t, state)
	ctx := context.Background()
	enq, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "p", Command: "poll", SubmittedBy: events.ActorCLI, MaxAttempts: 1, Now: time.Now()})
	require.NoError(t, err)
	_, err = commands.StartJob(ctx, l, commands.Start{JobID: enq.JobID, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	streamedAt := "2026-01-02T03:04:05.123456789Z"
	require.NoError(t, commands.RecordStderr(ctx, l, commands.StderrLines{JobID: enq.JobID, Attempt: 1, Line: 1,
		Lines: []events.StderrLine{{At: streamedAt, Text: "line one"}}, Truncated: true}))
	_, err = commands.CompleteJob(ctx, l, commands.Complete{JobID: enq.JobID, Attempt: 1, Now: time.Now(), Outcome: commands.Outcome{
		Kind: events.OutcomeError, Error: "exit 1", ExitCode: 1, Stderr: "line one\nline two\nline three",
		Response: json.RawMessage(`{"status":"error","error":"x","logs":[{"level":"warn","message":"logged"}]}`),
	}})
	require.NoError(t, err)
	evs, err := l.ReadStream(ctx, events.JobStream(enq.JobID))
	require.NoError(t, err)
	endedAt := evs[len(evs)-2].RecordedAt.UTC().Format(time.RFC3339Nano)
	require.Equal(t, events.JobFailed, evs[len(evs)-2].Type)

	var logs []logView
	r := ductile(t, nil, "job", "logs", enq.JobID, "--json", "--state-dir", state)
	require.Equal(t, 0, r.code, r.String())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &logs), r.stdout)
	require.Equal(t, []logView{
		{Attempt: 1, At: streamedAt, Stream: "stderr", Message: "line one"},
		{Attempt: 1, At: endedAt, Stream: "stderr", Message: "line two"},
		{Attempt: 1, At: endedAt, Stream: "stderr", Message: "line three"},
		{Attempt: 1, At: endedAt, Stream: "plugin", Level: "warn", Message: "logged"},
	}, logs)
	r = ductile(t, nil, "job", "logs", enq.JobID, "--state-dir", state)
	require.Equal(t, 0, r.code, r.String())
	require.Equal(t, "2026-01-02T03:04:05.123Z #1 stderr line one\n", strings.SplitAfter(r.stdout, "\n")[0])
}
