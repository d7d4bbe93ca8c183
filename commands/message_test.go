package commands_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

const msgID = "0193a1b2-0000-7000-8000-000000000001"

// published is a message.published of msgID on topic work.
func published() ledger.NewEvent {
	return ledger.NewEvent{Stream: events.MessageStream(msgID), Type: events.MessagePublished,
		Data: events.Message{ID: msgID, Topic: "work", Body: "b", ConversationID: msgID, CreatedAt: at(0)}}
}

// claimed is group g's claim of msgID at stream version v-1 (fence v).
func claimed(v int64, group string, attempt int, until time.Duration) ledger.NewEvent {
	return ledger.NewEvent{Stream: events.MessageStream(msgID), ExpectedVersion: v - 1, Type: events.MessageClaimed,
		Data: events.MessageClaim{Group: group, Worker: "w", Fence: v, LeaseUntil: at(until), Attempt: attempt}}
}

func claimCmd(group string, maxAttempts int) commands.ClaimMessageCmd {
	return commands.ClaimMessageCmd{MessageID: msgID, Group: group, Worker: "w2", Lease: 30 * time.Second, Now: now, MaxAttempts: maxAttempts,
		Backoff: func(int) time.Duration { return time.Second }}
}

func TestClaimMessage(t *testing.T) {
	t.Run("a first claim is attempt 1 with the claim's version as fence", func(t *testing.T) {
		b := setup(t)
		b.given(t, published())
		mark := b.mark(t)
		res, err := commands.ClaimMessage(b.ctx, b.l, claimCmd("g", 5))
		require.NoError(t, err)
		require.True(t, res.Claimed)
		require.Equal(t, int64(2), res.Fence)
		evs := b.since(t, mark)
		require.Len(t, evs, 1)
		require.JSONEq(t, `{"group":"g","worker":"w2","fence":2,"lease_until":"`+at(30*time.Second)+`","attempt":1}`, string(evs[0].Data))
	})
	t.Run("a live claim of the group refuses; another group claims", func(t *testing.T) {
		b := setup(t)
		b.given(t, published(), claimed(2, "g", 1, time.Second))
		mark := b.mark(t)
		res, err := commands.ClaimMessage(b.ctx, b.l, claimCmd("g", 5))
		require.NoError(t, err)
		require.False(t, res.Claimed)
		require.Empty(t, b.since(t, mark))
		res, err = commands.ClaimMessage(b.ctx, b.l, claimCmd("other", 5))
		require.NoError(t, err)
		require.True(t, res.Claimed)
		require.Equal(t, int64(3), res.Fence)
	})
	t.Run("an expired claim: not before the backoff, then attempt 2", func(t *testing.T) {
		b := setup(t)
		b.given(t, published(), claimed(2, "g", 1, -500*time.Millisecond))
		res, err := commands.ClaimMessage(b.ctx, b.l, claimCmd("g", 5))
		require.NoError(t, err)
		require.False(t, res.Claimed)
		require.Equal(t, now.Add(500*time.Millisecond), res.RetryAt)
		b2 := setup(t)
		b2.given(t, published(), claimed(2, "g", 1, -time.Second))
		res, err = commands.ClaimMessage(b2.ctx, b2.l, claimCmd("g", 5))
		require.NoError(t, err)
		require.True(t, res.Claimed)
		require.Equal(t, 2, res.Attempt)
	})
	t.Run("the last attempt expired: claim_ended and the dead letter in one append", func(t *testing.T) {
		b := setup(t)
		b.given(t, published(), claimed(2, "g", 2, -time.Second))
		mark := b.mark(t)
		res, err := commands.ClaimMessage(b.ctx, b.l, claimCmd("g", 2))
		require.NoError(t, err)
		require.False(t, res.Claimed)
		require.NotNil(t, res.DeadLetter)
		evs := b.since(t, mark)
		require.Len(t, evs, 2)
		require.Equal(t, events.MessageClaimEnded, evs[0].Type)
		require.Equal(t, events.MessagePublished, evs[1].Type)
		require.Equal(t, evs[0].RecordedAt, evs[1].RecordedAt, "one transaction")
		var dead events.Message
		require.NoError(t, json.Unmarshal(evs[1].Data, &dead))
		require.Equal(t, "work.dead", dead.Topic)
		require.Equal(t, msgID, dead.ParentID)
		// The group is done with it now.
		res, err = commands.ClaimMessage(b.ctx, b.l, claimCmd("g", 2))
		require.NoError(t, err)
		require.False(t, res.Claimed)
		require.Nil(t, res.DeadLetter)
	})
	t.Run("an unknown message", func(t *testing.T) {
		b := setup(t)
		_, err := commands.ClaimMessage(b.ctx, b.l, claimCmd("g", 5))
		require.ErrorIs(t, err, commands.ErrMessageNotFound)
	})
}

func TestFinishMessage(t *testing.T) {
	finish := func(fence int64) commands.FinishMessageCmd {
		return commands.FinishMessageCmd{MessageID: msgID, MessageFence: commands.MessageFence{Group: "g", Worker: "w", Fence: fence},
			Status: events.ClaimCompleted, FollowUpTopic: "done", Body: "ok", Now: now}
	}
	t.Run("ends the claim and publishes the follow-up in one append", func(t *testing.T) {
		b := setup(t)
		b.given(t, published(), claimed(2, "g", 1, time.Minute))
		mark := b.mark(t)
		res, err := commands.FinishMessage(b.ctx, b.l, finish(2))
		require.NoError(t, err)
		evs := b.since(t, mark)
		require.Len(t, evs, 2)
		require.Equal(t, events.MessageClaimEnded, evs[0].Type)
		require.Equal(t, evs[0].RecordedAt, evs[1].RecordedAt)
		require.JSONEq(t, `{"group":"g","worker":"w","fence":2,"status":"completed","follow_up_id":"`+res.FollowUp.ID+`"}`, string(evs[0].Data))
		require.Equal(t, msgID, res.FollowUp.ConversationID)
	})
	t.Run("a stale fence is recorded as superseded, nothing published", func(t *testing.T) {
		b := setup(t)
		b.given(t, published(), claimed(2, "g", 1, time.Minute))
		mark := b.mark(t)
		_, err := commands.FinishMessage(b.ctx, b.l, finish(1))
		var stale *commands.MessageStaleFenceError
		require.ErrorAs(t, err, &stale)
		require.ErrorIs(t, err, commands.ErrStaleFence)
		require.Equal(t, int64(2), stale.Current)
		evs := b.since(t, mark)
		require.Len(t, evs, 1)
		require.Equal(t, events.MessageSuperseded, evs[0].Type)
	})
	t.Run("a bad status is invalid", func(t *testing.T) {
		b := setup(t)
		cmd := finish(2)
		cmd.Status = events.ClaimExpired
		_, err := commands.FinishMessage(b.ctx, b.l, cmd)
		require.ErrorIs(t, err, commands.ErrInvalidCommand)
	})
}

func TestSweepMessageClaim(t *testing.T) {
	b := setup(t)
	b.given(t, published(), claimed(2, "g", 1, -time.Second))
	mark := b.mark(t)
	res, err := commands.SweepMessageClaim(b.ctx, b.l, commands.ExpireMessageClaim{MessageID: msgID, Group: "g", Fence: 2, Now: now, MaxAttempts: 5})
	require.NoError(t, err)
	require.True(t, res.Expired)
	require.Nil(t, res.DeadLetter)
	evs := b.since(t, mark)
	require.Len(t, evs, 1)
	require.Contains(t, string(evs[0].Data), `"status":"expired"`)
	// Once recorded, a second sweep of the same claim does nothing.
	res, err = commands.SweepMessageClaim(b.ctx, b.l, commands.ExpireMessageClaim{MessageID: msgID, Group: "g", Fence: 2, Now: now, MaxAttempts: 5})
	require.NoError(t, err)
	require.False(t, res.Expired)
}
