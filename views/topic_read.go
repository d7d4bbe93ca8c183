package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// ErrBadMessageFilter means a MessageFilter names neither or both of a
// topic and a conversation.
var ErrBadMessageFilter = errors.New("give a topic or a conversation, not both")

// ReadMessages reads a page of messages, oldest first, by topic or by
// conversation, after the message f.After: one index range of the page's
// size (the cost follows the page, not the history). An After that names
// no message is ErrMessageNotFound.
func ReadMessages(ctx context.Context, l *ledger.Ledger, f MessageFilter) (page MessagePage, err error) {
	if (f.Topic == "") == (f.Conversation == "") {
		return MessagePage{}, fmt.Errorf("read messages: %w", ErrBadMessageFilter)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultMessageLimit
	}
	limit = min(limit, MaxMessageLimit)
	page.Messages = []MessageRecord{}
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		var after int64
		if f.After != "" {
			m, ok, err := messageByID(conn, f.After)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: after %s (give the id of a message read before, or none)", ErrMessageNotFound, f.After)
			}
			after = m.Seq
		}
		add := func(r MessageRecord) error {
			page.Messages = append(page.Messages, r)
			return nil
		}
		if f.Topic != "" {
			return queries.ListTopicMessages(conn, queries.ListTopicMessagesParams{Topic: f.Topic, After: after, MaxRows: int64(limit)},
				func(r queries.ListTopicMessagesRow) error { return add(messageRecord(queries.TopicMessageByIDRow(r))) })
		}
		return queries.ListConversationMessages(conn, queries.ListConversationMessagesParams{ConversationID: f.Conversation, After: after,
			MaxRows: int64(limit)}, func(r queries.ListConversationMessagesRow) error {
			return add(messageRecord(queries.TopicMessageByIDRow(r)))
		})
	})
	if err != nil {
		return MessagePage{}, fmt.Errorf("read messages: %w", err)
	}
	if len(page.Messages) == limit {
		page.Next = page.Messages[len(page.Messages)-1].ID
	}
	return page, nil
}

// CheckConversation says whether conversation conv has a terminal reply
// yet: the first of its messages on the success topic (success), or on the
// failure topic or a topic ending .timed_out or .dead (failure). A
// conversation with no message is ErrMessageNotFound; one whose first
// message is recorded but not projected yet is pending.
func CheckConversation(ctx context.Context, l *ledger.Ledger, conv, success, failure string) (ConversationCheck, error) {
	check := ConversationCheck{State: ConversationPending}
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		known := false
		err := queries.ListConversationMessages(conn, queries.ListConversationMessagesParams{ConversationID: conv, MaxRows: 1},
			func(queries.ListConversationMessagesRow) error { known = true; return nil })
		if err != nil {
			return err
		}
		if !known {
			return errNotProjected
		}
		return queries.ConversationReply(conn, queries.ConversationReplyParams{ConversationID: conv, Success: success, Failure: failure},
			func(r queries.ConversationReplyRow) error {
				m := messageRecord(queries.TopicMessageByIDRow(r))
				check.Reply = &m
				check.State = ConversationFailure
				if m.Topic == success {
					check.State = ConversationSuccess
				}
				return nil
			})
	})
	if errors.Is(err, errNotProjected) {
		// Just published by a process whose appends the projector has not
		// applied yet: its first message's stream says it exists.
		evs, err := l.ReadStream(ctx, events.MessageStream(conv))
		if err != nil {
			return ConversationCheck{}, fmt.Errorf("check conversation: %w", err)
		}
		if len(evs) == 0 {
			return ConversationCheck{}, fmt.Errorf("check conversation: %w: no conversation %s (a conversation's id is the id of its first message)", ErrMessageNotFound, conv)
		}
		return ConversationCheck{State: ConversationPending}, nil
	}
	if err != nil {
		return ConversationCheck{}, fmt.Errorf("check conversation: %w", err)
	}
	return check, nil
}

// errNotProjected: the projections do not show the conversation (yet).
var errNotProjected = errors.New("not projected")

// InspectMessage is message id with every group's claim of it, their
// states judged now.
func InspectMessage(ctx context.Context, l *ledger.Ledger, id string) (MessageInspection, error) {
	var out MessageInspection
	now := time.Now()
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		m, ok, err := messageByID(conn, id)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s (see: ductile topic read)", ErrMessageNotFound, id)
		}
		out, err = inspectMessage(conn, m, now)
		return err
	})
	if err != nil {
		return MessageInspection{}, fmt.Errorf("inspect message: %w", err)
	}
	return out, nil
}

// maxInspectedMessages bounds the messages of a conversation an
// inspection shows.
const maxInspectedMessages = MaxMessageLimit

// InspectConversation is conversation conv's messages, oldest first (at
// most 1000), each with its claims, their states judged now.
func InspectConversation(ctx context.Context, l *ledger.Ledger, conv string) (ConversationInspection, error) {
	out := ConversationInspection{ConversationID: conv, Messages: []MessageInspection{}}
	now := time.Now()
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		var ms []MessageRecord
		err := queries.ListConversationMessages(conn, queries.ListConversationMessagesParams{ConversationID: conv, MaxRows: maxInspectedMessages},
			func(r queries.ListConversationMessagesRow) error {
				ms = append(ms, messageRecord(queries.TopicMessageByIDRow(r)))
				return nil
			})
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return fmt.Errorf("%w: no conversation %s (a conversation's id is the id of its first message)", ErrMessageNotFound, conv)
		}
		for _, m := range ms {
			mi, err := inspectMessage(conn, m, now)
			if err != nil {
				return err
			}
			out.Messages = append(out.Messages, mi)
		}
		return nil
	})
	if err != nil {
		return ConversationInspection{}, fmt.Errorf("inspect conversation: %w", err)
	}
	return out, nil
}

func inspectMessage(conn *sqlite.Conn, m MessageRecord, now time.Time) (MessageInspection, error) {
	out := MessageInspection{MessageRecord: m, Claims: []MessageClaimRecord{}}
	err := queries.ListMessageClaims(conn, m.ID, func(r queries.ListMessageClaimsRow) error {
		c := MessageClaimRecord{Group: r.WorkerGroup, Worker: r.Worker, Status: r.Status, Fence: r.Fence, LeaseUntil: r.LeaseUntil,
			Attempts: int(r.Attempts), ClaimedAt: r.ClaimedAt, EndedAt: deref(r.EndedAt), FollowUpID: deref(r.FollowUpID), Error: deref(r.Error)}
		c.State = ClaimTerminal
		if r.Status == "active" {
			c.State = ClaimLiveActive
			if until, err := time.Parse(time.RFC3339Nano, r.LeaseUntil); err == nil && !now.Before(until) {
				c.State = ClaimExpiredActive
			}
		}
		out.Claims = append(out.Claims, c)
		return nil
	})
	return out, err
}

func messageByID(conn *sqlite.Conn, id string) (m MessageRecord, ok bool, err error) {
	err = queries.TopicMessageByID(conn, id, func(r queries.TopicMessageByIDRow) error {
		m, ok = messageRecord(r), true
		return nil
	})
	return m, ok, err
}

func messageRecord(r queries.TopicMessageByIDRow) MessageRecord {
	m := MessageRecord{ID: r.ID, Topic: r.Topic, Body: r.Body, ConversationID: r.ConversationID, ParentID: deref(r.ParentID),
		Producer: deref(r.Producer), CreatedAt: r.CreatedAt, Seq: r.Seq}
	if r.Metadata != nil {
		m.Metadata = json.RawMessage(*r.Metadata)
	}
	return m
}
