package projections_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// TestTopicsReplayIsExact drives the topic exchange's commands at random
// (publish, claim by two groups, renew, finish with and without a
// follow-up, stale finishes, expiries, dead letters), projecting in odd
// batches between them; a rebuild from scratch must dump the same rows,
// and each group's cursor must stand just before its first message not
// done.
func TestTopicsReplayIsExact(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 24))
	ctx := context.Background()
	l := openLedger(t, "ductile.db")
	p := projections.New(l, projections.Options{BatchSize: 7})
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	backoff := func(int) time.Duration { return time.Second }
	var ids []string
	type claim struct {
		id    string
		fence commands.MessageFence
	}
	var active []claim
	groups := []string{"a", "b"}
	for step := 0; step < 1500; step++ {
		now = now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
		switch r := rng.IntN(10); {
		case r < 3 || len(ids) == 0:
			parent := ""
			if len(ids) > 0 && rng.IntN(3) == 0 {
				parent = ids[rng.IntN(len(ids))]
			}
			m, err := commands.PublishMessage(ctx, l, commands.Publish{Topic: fmt.Sprint("t", rng.IntN(2)), Body: "b", ParentID: parent, Now: now})
			require.NoError(t, err)
			ids = append(ids, m.ID)
		case r < 6:
			id, group := ids[rng.IntN(len(ids))], groups[rng.IntN(2)]
			res, err := commands.ClaimMessage(ctx, l, commands.ClaimMessageCmd{MessageID: id, Group: group, Worker: "w", Lease: 5 * time.Second,
				Now: now, MaxAttempts: 2, Backoff: backoff})
			require.NoError(t, err)
			if res.Claimed {
				active = append(active, claim{id, commands.MessageFence{Group: group, Worker: "w", Fence: res.Fence}})
			}
		case r < 8 && len(active) > 0:
			i := rng.IntN(len(active))
			c := active[i]
			topic := ""
			if rng.IntN(2) == 0 {
				topic = "done"
			}
			_, err := commands.FinishMessage(ctx, l, commands.FinishMessageCmd{MessageID: c.id, MessageFence: c.fence, Status: events.ClaimCompleted,
				FollowUpTopic: topic, Body: "ok", Now: now})
			if err != nil {
				require.ErrorIs(t, err, commands.ErrStaleFence)
			}
			active = append(active[:i], active[i+1:]...)
		case r < 9 && len(active) > 0:
			c := active[rng.IntN(len(active))]
			_, err := commands.RenewMessage(ctx, l, commands.RenewMessageCmd{MessageID: c.id, MessageFence: c.fence, Lease: 5 * time.Second, Now: now})
			if err != nil {
				require.ErrorIs(t, err, commands.ErrStaleFence)
			}
		case len(active) > 0:
			c := active[rng.IntN(len(active))]
			_, err := commands.SweepMessageClaim(ctx, l, commands.ExpireMessageClaim{MessageID: c.id, Group: c.fence.Group, Fence: c.fence.Fence,
				Now: now, MaxAttempts: 2})
			require.NoError(t, err)
		}
		for range rng.IntN(2) {
			_, err := p.RunOnce(ctx)
			require.NoError(t, err)
		}
	}
	catchUp(t, p)
	incremental, _ := dump(t, l)
	require.Contains(t, string(incremental), `"WorkerGroup":"a"`)
	_, err := projections.Rebuild(ctx, l, 0)
	require.NoError(t, err)
	replayed, _ := dump(t, l)
	require.True(t, bytes.Equal(incremental, replayed), "replay differs from incremental projection")

	// Each cursor stands just before its group's first message not done.
	require.NoError(t, l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		return queries.DumpTopicCursors(conn, func(c queries.DumpTopicCursorsRow) error {
			first := int64(-1)
			err := queries.FirstUnfinishedMessage(conn, queries.FirstUnfinishedMessageParams{WorkerGroup: c.WorkerGroup, Topic: c.Topic, After: 0},
				func(seq int64) error { first = seq; return nil })
			require.NoError(t, err)
			if first >= 0 {
				require.Less(t, c.DoneThrough, first, "cursor of %s/%s", c.Topic, c.WorkerGroup)
			}
			return nil
		})
	}))
}
