package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/projections"
)

// TestQueueListsOldestFirstUpToALimit fills a queue no daemon runs (six
// jobs: the second running, the third running with a cancel request) and
// requires queue to list it in run order, oldest first, up to --limit,
// saying how many it left out, in text and in JSON.
func TestQueueListsOldestFirstUpToALimit(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "")
	ctx := context.Background()
	l := openLedger(t, w.state)
	var ids []string
	for range 6 {
		res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "sink", Command: "handle", SubmittedBy: events.ActorCLI,
			MaxAttempts: 1, Now: time.Now()})
		require.NoError(t, err)
		ids = append(ids, res.JobID)
	}
	for _, id := range ids[1:3] {
		_, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: time.Now()})
		require.NoError(t, err)
	}
	_, err := commands.CancelJob(ctx, l, commands.Cancel{JobID: ids[2], Reason: "test", Actor: events.ActorCLI, Now: time.Now()})
	require.NoError(t, err)
	_, err = projections.New(l, projections.Options{}).CatchUp(ctx)
	require.NoError(t, err)

	type queueView struct {
		Counts map[string]int64 `json:"counts"`
		Active []jobView        `json:"active"`
		More   int64            `json:"more"`
	}
	listed := func(q queueView) []string {
		var out []string
		for _, j := range q.Active {
			out = append(out, j.ID+" "+j.Status)
		}
		return out
	}
	all := []string{ids[0] + " queued", ids[1] + " running", ids[2] + " cancel_requested",
		ids[3] + " queued", ids[4] + " queued", ids[5] + " queued"}

	var q queueView
	w.runJSON(0, &q, "queue", "--limit", "3", "--json")
	require.Equal(t, map[string]int64{"queued": 4, "running": 1, "cancel_requested": 1}, q.Counts)
	require.Equal(t, all[:3], listed(q), "the oldest first: the order the jobs run in")
	require.Equal(t, int64(3), q.More)

	q = queueView{}
	w.runJSON(0, &q, "queue", "--limit", "0", "--json")
	require.Equal(t, all, listed(q), "--limit 0 lists every active job")
	require.Zero(t, q.More)

	r := w.run("queue", "--limit", "2")
	require.Equal(t, 0, r.code, "%s", r)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	require.Len(t, lines, 5, "%s", r.stdout)
	require.Equal(t, "queued 4, running 2 (1 cancel requested)", lines[0])
	require.True(t, strings.HasPrefix(lines[2], ids[0][24:]+" "), "the short id: %s", lines[2])
	require.True(t, strings.HasPrefix(lines[3], ids[1][24:]+" "), "the short id: %s", lines[3])
	require.Equal(t, "… and 4 more (see: ductile queue --limit 0)", lines[4])

	r = w.run("queue", "--limit", "-1")
	require.Equal(t, 2, r.code, "a negative limit is a usage error: %s", r)
}
