package views_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

func (b *testBundle) publishMessage(t *testing.T, topic, body, parent string) events.Message {
	t.Helper()
	m, err := commands.PublishMessage(b.ctx, b.l, commands.Publish{Topic: topic, Body: body, ParentID: parent, Now: now})
	require.NoError(t, err)
	return m
}

func TestReadMessagesPagesByTopic(t *testing.T) {
	b := setup(t)
	var ids []string
	for i := range 7 {
		ids = append(ids, b.publishMessage(t, "work", fmt.Sprint(i), "").ID)
		b.publishMessage(t, "noise", fmt.Sprint(i), "")
	}
	b.project(t)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		page, err := views.ReadMessages(b.ctx, b.l, views.MessageFilter{Topic: "work", After: after, Limit: 3})
		require.NoError(t, err)
		for _, m := range page.Messages {
			got = append(got, m.ID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	require.Equal(t, ids, got, "every message of the topic once, in seq order")

	_, err := views.ReadMessages(b.ctx, b.l, views.MessageFilter{})
	require.ErrorIs(t, err, views.ErrBadMessageFilter)
	_, err = views.ReadMessages(b.ctx, b.l, views.MessageFilter{Topic: "work", Conversation: ids[0]})
	require.ErrorIs(t, err, views.ErrBadMessageFilter)
	_, err = views.ReadMessages(b.ctx, b.l, views.MessageFilter{Topic: "work", After: "no-such-id"})
	require.ErrorIs(t, err, views.ErrMessageNotFound)
	page, err := views.ReadMessages(b.ctx, b.l, views.MessageFilter{Topic: "nothing.here"})
	require.NoError(t, err)
	require.NotNil(t, page.Messages, "an empty page is [], not null")
	require.Empty(t, page.Messages)
}

func TestCheckConversationAndInspectClaims(t *testing.T) {
	b := setup(t)
	root := b.publishMessage(t, "ask", "q", "")
	check, err := views.CheckConversation(b.ctx, b.l, root.ID, "ask.done", "ask.failed")
	require.NoError(t, err)
	require.Equal(t, views.ConversationPending, check.State, "recorded, not projected yet: pending, not not_found")
	b.project(t)
	check, err = views.CheckConversation(b.ctx, b.l, root.ID, "ask.done", "ask.failed")
	require.NoError(t, err)
	require.Equal(t, views.ConversationPending, check.State)
	_, err = views.CheckConversation(b.ctx, b.l, "no-such-conversation", "ask.done", "ask.failed")
	require.ErrorIs(t, err, views.ErrMessageNotFound)

	// Group live claims with a lease ahead of the real clock; group gone
	// claimed with a lease already run out.
	real := time.Now()
	for group, lease := range map[string]time.Duration{"live": time.Hour, "gone": time.Second} {
		at := real
		if group == "gone" {
			at = real.Add(-time.Minute)
		}
		res, err := commands.ClaimMessage(b.ctx, b.l, commands.ClaimMessageCmd{MessageID: root.ID, Group: group, Worker: "w", Lease: lease,
			Now: at, MaxAttempts: 5, Backoff: func(int) time.Duration { return time.Second }})
		require.NoError(t, err)
		require.True(t, res.Claimed)
	}
	b.project(t)
	inspected, err := views.InspectMessage(b.ctx, b.l, root.ID)
	require.NoError(t, err)
	states := map[string]string{}
	for _, c := range inspected.Claims {
		states[c.Group] = c.State
	}
	require.Equal(t, map[string]string{"live": views.ClaimLiveActive, "gone": views.ClaimExpiredActive}, states)

	// The timed-out reply of a request ends the conversation as a failure.
	b.publishMessage(t, "ask.timed_out", "too slow", root.ID)
	b.project(t)
	check, err = views.CheckConversation(b.ctx, b.l, root.ID, "ask.done", "ask.failed")
	require.NoError(t, err)
	require.Equal(t, views.ConversationFailure, check.State)
	require.Equal(t, "ask.timed_out", check.Reply.Topic)
	_, err = views.InspectMessage(b.ctx, b.l, "no-such-message")
	require.ErrorIs(t, err, views.ErrMessageNotFound)
}

// An archive never splits a message's stream nor takes one with a claim
// in flight: claims fold the stream whole.
func TestArchiveCutKeepsMessagesInFlight(t *testing.T) {
	b := setup(t)
	m := b.publishMessage(t, "work", "x", "")
	res, err := commands.ClaimMessage(b.ctx, b.l, commands.ClaimMessageCmd{MessageID: m.ID, Group: "g", Worker: "w", Lease: time.Hour,
		Now: time.Now(), MaxAttempts: 5, Backoff: func(int) time.Duration { return time.Second }})
	require.NoError(t, err)
	require.True(t, res.Claimed)
	b.publishMessage(t, "work", "y", "")
	b.project(t)
	head, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	cut := func() (int64, string) {
		var through int64
		var why string
		require.NoError(t, b.l.ReadSnapshot(b.ctx, func(conn *sqlite.Conn) (err error) {
			through, why, err = views.ArchiveCut(conn, head)
			return err
		}))
		return through, why
	}
	through, why := cut()
	require.Equal(t, int64(0), through, "the claimed message is the first event")
	require.Contains(t, why, m.ID)

	_, err = commands.FinishMessage(b.ctx, b.l, commands.FinishMessageCmd{MessageID: m.ID, MessageFence: commands.MessageFence{Group: "g", Worker: "w", Fence: res.Fence},
		Status: events.ClaimCompleted, Now: time.Now()})
	require.NoError(t, err)
	b.project(t)
	through, why = cut()
	require.Equal(t, int64(0), through, "the finish comes after the cut: the stream would split")
	head, err = b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	through, why = cut()
	require.Equal(t, head, through, why)
}
