package views

import (
	"encoding/json"
	"errors"
)

// ErrMessageNotFound means no message (or conversation) has the id asked
// for.
var ErrMessageNotFound = errors.New("message not found")

// MessageFilter selects messages to read: by Topic or by Conversation (one
// of them), those after the message After (empty: from the first), at most
// Limit (0: DefaultMessageLimit; at most MaxMessageLimit).
type MessageFilter struct {
	Topic        string
	Conversation string
	After        string
	Limit        int
}

// Message page sizes.
const (
	DefaultMessageLimit = 100
	MaxMessageLimit     = 1000
)

// MessageRecord is a message as a reader sees it; Seq is the ledger seq of
// its message.published (the order of messages).
type MessageRecord struct {
	ID             string          `json:"id"`
	Topic          string          `json:"topic"`
	Body           string          `json:"body"`
	ParentID       string          `json:"parent_id,omitempty"`
	ConversationID string          `json:"conversation_id"`
	Producer       string          `json:"producer,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	CreatedAt      string          `json:"created_at"`
	Seq            int64           `json:"seq"`
}

// MessagePage is a page of messages, oldest first; Next is the id to give
// as After for the next page (empty: this page is the last one now).
type MessagePage struct {
	Messages []MessageRecord `json:"messages"`
	Next     string          `json:"next,omitempty"`
}

// Conversation check states.
const (
	ConversationPending = "pending"
	ConversationSuccess = "success"
	ConversationFailure = "failure"
)

// ConversationCheck says whether a conversation has a terminal reply yet:
// State pending, success (a message on the success topic) or failure (on
// the failure topic, or on a topic ending .timed_out or .dead); Reply is
// the first such message.
type ConversationCheck struct {
	State string         `json:"state"`
	Reply *MessageRecord `json:"reply,omitempty"`
}

// Claim states as an inspection shows them.
const (
	ClaimLiveActive    = "live_active"    // active, and its lease holds
	ClaimExpiredActive = "expired_active" // active, but its lease ran out
	ClaimTerminal      = "terminal"       // ended (status says how)
)

// MessageClaimRecord is one worker group's claim of a message, as last
// recorded: Status is the claim's (active, completed, failed, timed_out,
// expired), State what that means now (ClaimLiveActive,
// ClaimExpiredActive, ClaimTerminal).
type MessageClaimRecord struct {
	Group      string `json:"group"`
	Worker     string `json:"worker"`
	Status     string `json:"status"`
	State      string `json:"state"`
	Fence      int64  `json:"fence"`
	LeaseUntil string `json:"lease_until"`
	Attempts   int    `json:"attempts"`
	ClaimedAt  string `json:"claimed_at"`
	EndedAt    string `json:"ended_at,omitempty"`
	FollowUpID string `json:"follow_up_id,omitempty"`
	Error      string `json:"error,omitempty"`
}

// MessageInspection is a message with every group's claim of it.
type MessageInspection struct {
	MessageRecord
	Claims []MessageClaimRecord `json:"claims"`
}

// ConversationInspection is a conversation's messages, oldest first, each
// with its claims.
type ConversationInspection struct {
	ConversationID string              `json:"conversation_id"`
	Messages       []MessageInspection `json:"messages"`
}
