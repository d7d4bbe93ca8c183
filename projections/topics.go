package projections

import (
	"errors"
	"fmt"
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// Topics is the topic exchange's read model (docs/topics.md): every message
// (topic_messages), each worker group's claim of each message as last
// recorded (topic_claims), and per topic and group the seq through which
// the group is done with every message (topic_cursors), which a claim
// scans from. The cursor moves when a claim ends for good: past the
// message and every message after it the group is already done with, so
// each message is stepped over once.
type Topics struct{}

func (Topics) Name() string { return "topics" }

func (Topics) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	switch ev.Type {
	case events.MessagePublished:
		var m events.Message
		if err := decodeData(ev.Data, &m); err != nil {
			return fmt.Errorf("%s seq %d: %w", ev.Type, ev.Seq, err)
		}
		var metadata *string
		if len(m.Metadata) > 0 {
			s := string(m.Metadata)
			metadata = &s
		}
		return queries.InsertTopicMessage(conn, queries.InsertTopicMessageParams{Seq: ev.Seq, ID: m.ID, Topic: m.Topic,
			ConversationID: m.ConversationID, ParentID: strPtr(m.ParentID), Producer: strPtr(m.Producer), Body: m.Body,
			Metadata: metadata, CreatedAt: m.CreatedAt})
	case events.MessageClaimed:
		var c events.MessageClaim
		if err := decodeData(ev.Data, &c); err != nil {
			return fmt.Errorf("%s seq %d: %w", ev.Type, ev.Seq, err)
		}
		id := events.MessageIDFromStream(ev.Stream)
		m, err := queries.TopicMessageSeq(conn, id)
		if err != nil {
			return fmt.Errorf("%s seq %d: message %s: %w", ev.Type, ev.Seq, id, err)
		}
		return queries.UpsertTopicClaim(conn, queries.UpsertTopicClaimParams{MessageID: id, WorkerGroup: c.Group, Topic: m.Topic,
			MessageSeq: m.Seq, Worker: c.Worker, Fence: c.Fence, LeaseUntil: c.LeaseUntil, Attempts: int64(c.Attempt),
			ClaimedAt: ev.RecordedAtText(), UpdatedSeq: ev.Seq})
	case events.MessageLeaseRenewed:
		var r events.MessageLeaseRenewedData
		if err := decodeData(ev.Data, &r); err != nil {
			return fmt.Errorf("%s seq %d: %w", ev.Type, ev.Seq, err)
		}
		return queries.RenewTopicClaim(conn, queries.RenewTopicClaimParams{LeaseUntil: r.LeaseUntil, UpdatedSeq: ev.Seq,
			MessageID: events.MessageIDFromStream(ev.Stream), WorkerGroup: r.Group, Fence: r.Fence})
	case events.MessageClaimEnded:
		var d events.MessageClaimEndedData
		if err := decodeData(ev.Data, &d); err != nil {
			return fmt.Errorf("%s seq %d: %w", ev.Type, ev.Seq, err)
		}
		done := d.Status != events.ClaimExpired || d.FollowUpID != ""
		ended := ev.RecordedAtText()
		row, err := queries.EndTopicClaim(conn, queries.EndTopicClaimParams{Status: string(d.Status), Done: boolInt(done),
			EndedAt: &ended, FollowUpID: strPtr(d.FollowUpID), Error: strPtr(d.Error), UpdatedSeq: ev.Seq,
			MessageID: events.MessageIDFromStream(ev.Stream), WorkerGroup: d.Group, Fence: d.Fence})
		if errors.Is(err, queries.ErrNoRows) {
			return nil // an end of a claim another claim replaced: the commands never append one
		}
		if err != nil || !done {
			return err
		}
		return advanceCursor(conn, row.Topic, d.Group)
	}
	return nil
}

// advanceCursor moves group's cursor in topic past every message, from
// where it stands, that the group is done with.
func advanceCursor(conn *sqlite.Conn, topic, group string) error {
	cursor, err := queries.TopicCursor(conn, queries.TopicCursorParams{Topic: topic, WorkerGroup: group})
	if err != nil && !errors.Is(err, queries.ErrNoRows) {
		return err
	}
	next := int64(-1)
	err = queries.FirstUnfinishedMessage(conn, queries.FirstUnfinishedMessageParams{WorkerGroup: group, Topic: topic, After: cursor},
		func(seq int64) error { next = seq - 1; return nil })
	if err != nil {
		return err
	}
	if next < 0 { // done with every message of the topic
		if err := queries.LastTopicMessage(conn, topic, func(seq int64) error { next = seq; return nil }); err != nil {
			return err
		}
	}
	if next <= cursor {
		return nil
	}
	return queries.SetTopicCursor(conn, queries.SetTopicCursorParams{Topic: topic, WorkerGroup: group, DoneThrough: next})
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (Topics) Reset(conn *sqlite.Conn) error {
	return errors.Join(queries.DeleteTopicMessages(conn), queries.DeleteTopicClaims(conn), queries.DeleteTopicCursors(conn))
}

func (Topics) Dump(conn *sqlite.Conn, w io.Writer) error {
	if err := queries.DumpTopicMessages(conn, func(r queries.DumpTopicMessagesRow) error { return dumpRow(w, r) }); err != nil {
		return err
	}
	if err := queries.DumpTopicClaims(conn, func(r queries.DumpTopicClaimsRow) error { return dumpRow(w, r) }); err != nil {
		return err
	}
	return queries.DumpTopicCursors(conn, func(r queries.DumpTopicCursorsRow) error { return dumpRow(w, r) })
}
