package stream_test

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/stream"
)

// TestTopicAndConversationFilters: ?topic= passes the events of that
// topic's messages only (a claim of a message published before the stream
// started included, judged by reading the message), ?conversation= those
// of one conversation; other streams do not pass.
func TestTopicAndConversationFilters(t *testing.T) {
	b := setup(t, stream.Options{})
	p := projections.New(b.l, projections.Options{Logger: slog.New(slog.DiscardHandler)})
	p.Start(b.ctx)
	t.Cleanup(p.Stop)
	eng := engine.New(engine.Options{Ledger: b.l, Config: config.Default()})
	publish := func(topic, parent string) events.Message {
		m, err := eng.Publish(b.ctx, engine.Publish{Topic: topic, Body: "x", ParentID: parent})
		require.NoError(t, err)
		return m
	}
	a1 := publish("a", "")
	publish("b", "")
	start := b.head(t)
	c, _ := b.open(t, "?topic=a", start)
	defer c.close()
	claimed, err := eng.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: "a", Worker: "w", Wait: 5 * time.Second})
	require.NoError(t, err)
	require.NotNil(t, claimed)
	b.enqueue(t, "echo")
	publish("b", "")
	a2 := publish("a", "")
	got := c.events(t, 2)
	require.Equal(t, events.MessageClaimed, got[0].Event)
	require.Equal(t, events.MessageStream(a1.ID), got[0].Data.Stream, "a claim of a message published before the stream started")
	require.Equal(t, events.MessagePublished, got[1].Event)
	require.Equal(t, events.MessageStream(a2.ID), got[1].Data.Stream)

	// By conversation, from the start: a1, its claim and its follow-up.
	reply := publish("a.done", a1.ID)
	conv, _ := b.open(t, "?conversation="+a1.ConversationID, 0)
	defer conv.close()
	got = conv.events(t, 3)
	require.Equal(t, []string{events.MessageStream(a1.ID), events.MessageStream(a1.ID), events.MessageStream(reply.ID)},
		[]string{got[0].Data.Stream, got[1].Data.Stream, got[2].Data.Stream})

	resp, err := http.Get(b.srv.URL + "/events?topic=")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
