package views_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// ended is when an attempt's end was recorded, as log lines give it.
func ended(t *testing.T, b *testBundle, id, typ string, nth int) string {
	t.Helper()
	evs, err := b.l.ReadStream(b.ctx, events.JobStream(id))
	require.NoError(t, err)
	for _, ev := range evs {
		if ev.Type == typ {
			if nth--; nth == 0 {
				return ev.RecordedAt.UTC().Format(time.RFC3339Nano)
			}
		}
	}
	t.Fatalf("no %s", typ)
	return ""
}

// TestJobLogsFoldsStderrAndResponseLogs: a job's logs are its streamed
// stderr lines at the times they were read, then at each attempt's end the
// stderr lines not streamed and the response's logs, at the time it ended.
func TestJobLogsFoldsStderrAndResponseLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 2)
	lines, err := views.JobLogs(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, []views.LogLine{}, lines, "none yet: [] in JSON, not null")

	b.start(t, id)
	b.stderr(t, id, 1, 1, "one", "two")
	b.complete(t, id, 1, failed("one\ntwo\nthree\n"))
	b.start(t, id)
	b.complete(t, id, 2, commands.Outcome{Kind: events.OutcomeOK, Stderr: "hello\n",
		Response: json.RawMessage(`{"status":"ok","logs":[{"level":"info","message":"done"}]}`)})

	lines, err = views.JobLogs(b.ctx, b.l, id)
	require.NoError(t, err)
	first, second := ended(t, b, id, events.JobFailed, 1), ended(t, b, id, events.JobSucceeded, 1)
	require.Equal(t, []views.LogLine{
		{Attempt: 1, At: stderrLine(0, "").At, Stream: "stderr", Message: "one"},
		{Attempt: 1, At: stderrLine(1, "").At, Stream: "stderr", Message: "two"},
		{Attempt: 1, At: first, Stream: "stderr", Message: "three"},
		{Attempt: 2, At: second, Stream: "stderr", Message: "hello"},
		{Attempt: 2, At: second, Stream: "plugin", Level: "info", Message: "done"},
	}, lines)

	_, err = views.JobLogs(b.ctx, b.l, "ffffffff")
	var notFound *views.JobNotFoundError
	require.ErrorAs(t, err, &notFound)
}

// TestFollowJobLogsEndsWhenTheJobIsFinished: following a running job's
// logs gives the lines so far, then each new one as it is appended, and
// ends once the job is finished; a retry scheduled is not an end.
func TestFollowJobLogsEndsWhenTheJobIsFinished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 2)
	b.start(t, id)
	b.stderr(t, id, 1, 1, "before")

	got := make(chan views.LogLine)
	done := make(chan error, 1)
	go func() {
		done <- views.FollowJobLogs(b.ctx, b.l, id, func(line views.LogLine) error { got <- line; return nil })
	}()
	require.Equal(t, "before", (<-got).Message)
	b.stderr(t, id, 1, 2, "while")
	require.Equal(t, "while", (<-got).Message)
	b.complete(t, id, 1, failed("before\nwhile\n"))
	b.start(t, id)
	b.complete(t, id, 2, commands.Outcome{Kind: events.OutcomeOK,
		Response: json.RawMessage(`{"status":"ok","logs":[{"level":"warn","message":"last"}]}`)})
	require.Equal(t, views.LogLine{Attempt: 2, At: ended(t, b, id, events.JobSucceeded, 1), Stream: "plugin", Level: "warn", Message: "last"}, <-got)
	require.NoError(t, <-done)

	// A finished job's logs: the lines, then the end, at once.
	var all []string
	require.NoError(t, views.FollowJobLogs(b.ctx, b.l, id, func(line views.LogLine) error { all = append(all, line.Message); return nil }))
	require.Equal(t, []string{"before", "while", "last"}, all)
}

// TestFollowJobLogsEndsWithItsContext: a follow of a job that does not
// finish ends with its context, with the context's error.
func TestFollowJobLogsEndsWithItsContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 1)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() {
		done <- views.FollowJobLogs(ctx, b.l, id, func(views.LogLine) error { return nil })
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}
