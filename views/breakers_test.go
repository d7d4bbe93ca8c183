package views_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// failScheduled runs one scheduled job of plugin's poll that ends dead.
func (b *testBundle) failScheduled(t *testing.T, plugin string) string {
	t.Helper()
	res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: plugin, Command: "poll", SubmittedBy: events.ActorScheduler,
		MaxAttempts: 1, BackoffBase: time.Second, Now: now})
	require.NoError(t, err)
	b.start(t, res.JobID)
	b.complete(t, res.JobID, 1, commands.Outcome{Kind: events.OutcomeError, Error: "upstream 503"})
	return res.JobID
}

func TestReadBreakers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.failScheduled(t, "feed")
	}
	b.failScheduled(t, "mail")
	b.project(t)

	all, err := views.ReadBreakers(b.ctx, b.l, "", views.DefaultBreakerHistory)
	require.NoError(t, err)
	require.Len(t, all, 2)
	feed := all[0]
	require.Equal(t, "feed", feed.Plugin)
	require.Equal(t, "open", feed.State)
	require.EqualValues(t, 3, feed.Failures)
	require.Equal(t, commands.Time(now.Add(30*time.Minute)), *feed.ProbeAt)
	require.Equal(t, "upstream 503", *feed.LastError)
	require.Len(t, feed.History, 1)
	require.Equal(t, "open", feed.History[0].To)
	require.Equal(t, "failure_threshold", feed.History[0].Reason)
	require.Equal(t, "breaker open until "+commands.Time(now.Add(30*time.Minute))+" (3 consecutive failures)", feed.Summary())
	require.Equal(t, "breaker closed, 1 of 3 failures", all[1].Summary())
	require.Empty(t, all[1].History)

	one, err := views.ReadBreakers(b.ctx, b.l, "mail", 0)
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, "mail", one[0].Plugin)

	br, ok, err := views.ReadBreaker(b.ctx, b.l, "feed", "poll", 5)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, br.History, 1)
	br, ok, err = views.ReadBreaker(b.ctx, b.l, "feed", "sync", 5)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, "closed", br.State)

	require.ElementsMatch(t, []string{"plugin", "command", "state", "failures", "threshold", "opened_at", "probe_at", "probe_job_id",
		"last_job_id", "last_error", "updated_at", "updated_seq", "history"}, jsonKeys(t, feed))
}
