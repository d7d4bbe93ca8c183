package views_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// follow collects FollowRuns' deltas until last says to stop, within a
// deadline.
func follow(t *testing.T, b *testBundle, after int64, f views.RunDeltaFilter, last func(views.RunDelta) bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	var got []string
	err := views.FollowRuns(ctx, b.l, after, f, func(d views.RunDelta) error {
		p := "-"
		if d.Progress != nil {
			p = fmt.Sprint(*d.Progress)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s", d.Op, d.RunID[len(d.RunID)-4:], d.Status, p))
		require.NotZero(t, d.Seq)
		require.NotZero(t, d.UpdatedAt)
		if last(d) {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	require.NoError(t, err, "got %v", got)
	return got
}

// TestFollowRuns: from a seq, the runs channel carries an add for each run
// created and a change for each change of status or progress (not for an
// attempt's failure before its retry, nor an export item), filtered by
// run, task, plugin and status; a run created before the seq is read as it
// stood then.
func TestFollowRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.runJob(t, "echo", 1, func(c *commands.Enqueue) { c.JobID = "run-aaaa" })
	b.start(t, a)
	b.progress(t, a, 1, 0.1, "", "")
	mark := b.mark(t)
	b.progress(t, a, 1, 0.5, "", "")
	c := b.runJob(t, "fetch", 2, func(c *commands.Enqueue) { c.JobID, c.TaskID = "run-cccc", "t" })
	b.start(t, c)
	b.complete(t, c, 1, failed("x")) // retry scheduled: queued again
	b.start(t, c)
	b.export(t, c, 2, events.Exported{Type: events.ExportText, Text: "x"})
	b.cancel(t, c, "stop")
	b.complete(t, c, 2, commands.Outcome{Kind: events.OutcomeCanceled, Error: "canceled"})
	b.complete(t, a, 1, timedOut)

	all := follow(t, b, mark, views.RunDeltaFilter{}, func(d views.RunDelta) bool { return d.RunID == a && d.Status.Terminal() })
	require.Equal(t, []string{
		"change aaaa running 0.5",
		"add cccc queued -",
		"change cccc running -",
		"change cccc queued -",
		"change cccc running -",
		"change cccc cancel_requested -",
		"change cccc canceled -",
		"change aaaa timeout 0.5",
	}, all)
	require.Equal(t, all[1:7], follow(t, b, mark, views.RunDeltaFilter{TaskID: "t"}, func(d views.RunDelta) bool { return d.Status.Terminal() }))
	require.Equal(t, all[1:7], follow(t, b, mark, views.RunDeltaFilter{RunID: c}, func(d views.RunDelta) bool { return d.Status.Terminal() }))
	require.Equal(t, []string{all[0], all[7]}, follow(t, b, mark, views.RunDeltaFilter{PluginID: "echo"}, func(d views.RunDelta) bool { return d.Status.Terminal() }))
	require.Equal(t, []string{all[6]}, follow(t, b, 0, views.RunDeltaFilter{Status: views.RunCanceled}, func(views.RunDelta) bool { return true }))
}

// TestFollowRunExports: a run's items after a seq, then the ones appended
// while it follows; resuming after the seq of an item it got misses none
// and repeats none.
func TestFollowRunExports(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.runJob(t, "echo", 1)
	b.start(t, id)
	b.export(t, id, 1, events.Exported{Type: events.ExportText, Text: "one"})
	b.export(t, id, 1, events.Exported{Type: events.ExportText, Text: "two"})

	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	items := make(chan views.ExportItem)
	done := make(chan error, 1)
	go func() {
		done <- views.FollowRunExports(ctx, b.l, id, 0, func(it views.ExportItem) error {
			select {
			case items <- it:
			case <-ctx.Done():
			}
			if it.Text == "three" {
				return ledger.ErrStopFollowing
			}
			return nil
		})
	}()
	first, second := <-items, <-items
	require.Equal(t, []string{"one", "two"}, []string{first.Text, second.Text})
	b.export(t, id, 1, events.Exported{Type: events.ExportText, Text: "three"})
	third := <-items
	require.Equal(t, id+":3", third.ExportItemID)
	require.NoError(t, <-done)

	var resumed []string
	err := views.FollowRunExports(ctx, b.l, id, first.Seq, func(it views.ExportItem) error {
		resumed = append(resumed, it.Text)
		if it.Text == "three" {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"two", "three"}, resumed)
	require.False(t, errors.Is(ctx.Err(), context.DeadlineExceeded))
}
