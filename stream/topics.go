package stream

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// maxKnownMessages bounds how many messages a topic filter remembers the
// verdict of; past it, it forgets them all and looks them up again.
const maxKnownMessages = 100_000

// messageFilter passes the events of the messages of one topic and/or one
// conversation (GET /events?topic=T&conversation=C): their
// message.published and every later event on their streams (claims,
// renewals, ends, refusals). Events of other streams do not pass.
type messageFilter struct {
	l            *ledger.Ledger
	topic        string
	conversation string
	known        map[string]bool // message stream → passes
}

// newMessageFilter is the filter of q, or nil when q names no topic nor
// conversation.
func newMessageFilter(l *ledger.Ledger, q Query) *messageFilter {
	if q.Topic == "" && q.Conversation == "" {
		return nil
	}
	return &messageFilter{l: l, topic: q.Topic, conversation: q.Conversation, known: map[string]bool{}}
}

// passes says whether ev is of a message the filter names. A claim's
// event whose message.published the stream has not seen (published before
// the stream's start) is judged by reading that message's first event.
func (f *messageFilter) passes(ctx context.Context, ev views.Event) (bool, error) {
	if !strings.HasPrefix(ev.Stream, "message/") {
		return false, nil
	}
	if ok, seen := f.known[ev.Stream]; seen {
		return ok, nil
	}
	data := ev.Data
	if ev.Type != events.MessagePublished {
		first, found, err := f.l.ReadStreamVersion(ctx, ev.Stream, 1)
		if err != nil {
			return false, err
		}
		if !found || first.Type != events.MessagePublished {
			return false, nil
		}
		data = first.Data
	}
	var m events.Message
	if err := json.Unmarshal(data, &m); err != nil {
		return false, nil // not a message this version knows: not of the topic asked for
	}
	ok := (f.topic == "" || m.Topic == f.topic) && (f.conversation == "" || m.ConversationID == f.conversation)
	if len(f.known) >= maxKnownMessages {
		clear(f.known)
	}
	f.known[ev.Stream] = ok
	return ok, nil
}
