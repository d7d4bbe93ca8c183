package queries

import (
	"strings"
	"testing"
)

// TestTopicQueriesReadThroughTheirIndexes: a claim reads its topic's
// messages from the group's cursor on through (topic, seq) and each one's
// claim by its primary key; reads by topic or conversation and a
// conversation's check are one index range each. So their cost follows the
// backlog or the page, not the history.
func TestTopicQueriesReadThroughTheirIndexes(t *testing.T) {
	conn := planDB(t)
	for _, tc := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"ListClaimableMessages", listClaimableMessages, []any{"g", "work", 0, 256}, []string{"topic_messages_by_topic", "PRIMARY KEY (message_id=? AND worker_group=?)"}},
		{"FirstUnfinishedMessage", firstUnfinishedMessage, []any{"g", "work", 0}, []string{"topic_messages_by_topic", "PRIMARY KEY (message_id=? AND worker_group=?)"}},
		{"ListTopicMessages", listTopicMessages, []any{"work", 0, 100}, []string{"topic_messages_by_topic"}},
		{"ListConversationMessages", listConversationMessages, []any{"c", 0, 100}, []string{"topic_messages_by_conversation"}},
		{"ConversationReply", conversationReply, []any{"c", "ok", "bad"}, []string{"topic_messages_by_conversation"}},
		{"ListMessageClaims", listMessageClaims, []any{"m"}, []string{"PRIMARY KEY (message_id=?)"}},
		{"ListActiveTopicClaims", listActiveTopicClaims, nil, []string{"topic_claims_active"}},
	} {
		plan := strings.Join(explain(t, conn, tc.name, tc.query, tc.args...), "; ")
		t.Logf("%s: %s", tc.name, plan)
		for _, index := range tc.want {
			if !strings.Contains(plan, index) {
				t.Errorf("%s: plan %q does not use %s", tc.name, plan, index)
			}
		}
		if strings.Contains(plan, "USE TEMP B-TREE") {
			t.Errorf("%s: plan %q sorts", tc.name, plan)
		}
	}
}
