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

// TestReadPluginShowsStateTotalsAndNewestJobs: a plugin's record is its
// state as plugin_state mirrors it, its totals, and its newest jobs, newest
// first, at most the limit; another plugin's jobs are not among them.
func TestReadPluginShowsStateTotalsAndNewestJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec, err := views.ReadPlugin(b.ctx, b.l, "echo", 10)
	require.NoError(t, err)
	require.False(t, rec.Known(), "nothing of it yet")
	require.JSONEq(t, `{}`, string(rec.State))
	require.Equal(t, []views.Job{}, rec.Jobs)

	first := b.enqueue(t, "echo", 1)
	b.start(t, first)
	b.complete(t, first, 1, commands.Outcome{Kind: events.OutcomeOK, Response: json.RawMessage(`{"status":"ok","state_updates":{"n":1}}`), StateUpdates: json.RawMessage(`{"n":1}`)})
	dead := b.enqueue(t, "echo", 1)
	b.start(t, dead)
	b.complete(t, dead, 1, failed("boom\n"))
	other := b.enqueue(t, "other", 1)
	queued := b.enqueue(t, "echo", 1)
	b.project(t)

	rec, err = views.ReadPlugin(b.ctx, b.l, "echo", 2)
	require.NoError(t, err)
	require.True(t, rec.Known())
	require.JSONEq(t, `{"n":1}`, string(rec.State))
	require.NotNil(t, rec.StateUpdatedAt)
	require.Equal(t, map[events.Status]int64{events.StatusSucceeded: 1, events.StatusDead: 1}, rec.Totals)
	require.Len(t, rec.Jobs, 2, "the limit")
	require.Equal(t, []string{queued, dead}, []string{rec.Jobs[0].ID, rec.Jobs[1].ID})

	runs, err := views.LastRuns(b.ctx, b.l, []string{"echo", "other", "none"})
	require.NoError(t, err)
	require.Len(t, runs, 1, "other has a job that never started; none has nothing")
	require.Equal(t, dead, runs["echo"].ID, "the newest job that started, past the one queued")
	require.Equal(t, events.StatusDead, runs["echo"].Status)
	_ = other
}

// TestPluginLogsTailsItsJobsLines: a plugin's logs are the log lines of
// its jobs, oldest first by seq, the last n of them; after a cursor, the
// first n recorded after it.
func TestPluginLogsTailsItsJobsLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines, err := views.PluginLogs(b.ctx, b.l, "echo", 10, 0)
	require.NoError(t, err)
	require.Equal(t, []views.PluginLogLine{}, lines)

	one := b.enqueue(t, "echo", 2)
	two := b.enqueue(t, "echo", 1)
	b.enqueue(t, "other", 1)
	b.start(t, one)
	b.stderr(t, one, 1, 1, "a1")
	b.start(t, two)
	b.stderr(t, two, 1, 1, "b1")
	b.complete(t, one, 1, failed("a1\na2\n"))
	b.complete(t, two, 1, commands.Outcome{Kind: events.OutcomeOK, Stderr: "b1\n",
		Response: json.RawMessage(`{"status":"ok","logs":[{"level":"warn","message":"b-log"}]}`)})
	b.project(t)

	lines, err = views.PluginLogs(b.ctx, b.l, "echo", 10, 0)
	require.NoError(t, err)
	require.Equal(t, []string{one + " a1", two + " b1", one + " a2", two + " b-log"}, jobMessages(lines))
	for i := 1; i < len(lines); i++ {
		require.LessOrEqual(t, lines[i-1].Seq, lines[i].Seq)
	}

	last, err := views.PluginLogs(b.ctx, b.l, "echo", 2, 0)
	require.NoError(t, err)
	require.Equal(t, []string{one + " a2", two + " b-log"}, jobMessages(last), "the last 2")

	since, err := views.PluginLogs(b.ctx, b.l, "echo", 1, lines[0].Seq)
	require.NoError(t, err)
	require.Equal(t, []string{two + " b1"}, jobMessages(since), "the first after the cursor")
}

// TestFollowPluginLogsFollowsItsJobs: following a plugin's logs gives the
// last lines, then the new lines of its jobs going on and of those
// enqueued later, and none of another plugin's.
func TestFollowPluginLogsFollowsItsJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	running := b.enqueue(t, "echo", 1)
	b.start(t, running)
	b.stderr(t, running, 1, 1, "before")
	b.project(t)

	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	got := make(chan views.PluginLogLine)
	done := make(chan error, 1)
	go func() {
		done <- views.FollowPluginLogs(ctx, b.l, "echo", 10, func(line views.PluginLogLine) error {
			select {
			case got <- line:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	next := func() string {
		t.Helper()
		select {
		case line := <-got:
			return line.JobID + " " + line.Message
		case err := <-done:
			t.Fatalf("follow ended: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("no line")
		}
		return ""
	}
	require.Equal(t, running+" before", next())

	other := b.enqueue(t, "other", 1)
	b.start(t, other)
	b.stderr(t, other, 1, 1, "not mine")
	b.stderr(t, running, 1, 2, "during")
	require.Equal(t, running+" during", next())
	b.complete(t, running, 1, commands.Outcome{Kind: events.OutcomeOK, Stderr: "before\nduring\nafter\n", Response: json.RawMessage(`{"status":"ok"}`)})
	require.Equal(t, running+" after", next(), "the lines its end carries that were not streamed")

	later := b.enqueue(t, "echo", 1)
	b.start(t, later)
	b.stderr(t, later, 1, 1, "new job")
	require.Equal(t, later+" new job", next())
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

func jobMessages(lines []views.PluginLogLine) []string {
	out := []string{}
	for _, l := range lines {
		out = append(out, l.JobID+" "+l.Message)
	}
	return out
}
