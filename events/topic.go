package events

import "encoding/json"

// The topic exchange (issue 24): a message is published to a topic, each
// worker group claims it once under a lease, and the claim ends with a
// status and, usually, a follow-up message published in the same append.
// Everything about one message — its publication, every group's claims,
// renewals, ends and refused requests — is on its own stream, so a claim
// or a finish decides by folding one short stream.

// MessageStream is the stream of one message.
func MessageStream(id string) string { return "message/" + id }

// MessageIDFromStream returns the message id of a message stream, or "".
func MessageIDFromStream(stream string) string {
	if len(stream) > len("message/") && stream[:len("message/")] == "message/" {
		return stream[len("message/"):]
	}
	return ""
}

// Message event types.
const (
	// MessagePublished records a message: version 1 of its stream.
	MessagePublished = "message.published"
	// MessageClaimed records a worker group's claim of a message under a
	// lease.
	MessageClaimed = "message.claimed"
	// MessageLeaseRenewed records a renewal of a claim's lease: at most one
	// per claim per third of the lease (renewals between are coalesced).
	MessageLeaseRenewed = "message.lease_renewed"
	// MessageClaimEnded records the end of a claim, with the follow-up
	// message published in the same append, if any.
	MessageClaimEnded = "message.claim_ended"
	// MessageSuperseded records a renewal or finish sent with a fence that
	// no longer holds the claim: kept for forensics, never applied.
	MessageSuperseded = "message.superseded"
)

// DefaultGroup is the worker group of a claim that names none.
const DefaultGroup = "default"

// DeadTopicSuffix makes the topic of a message's dead letter: <topic>.dead.
const DeadTopicSuffix = ".dead"

// TimedOutTopicSuffix makes the topic a worker host publishes a timed-out
// message's follow-up to: <topic>.timed_out.
const TimedOutTopicSuffix = ".timed_out"

// Message caps.
const (
	// MaxMessageBody is the largest body a message may have, in bytes.
	MaxMessageBody = 1 << 20
	// MaxMessageMetadata is the largest metadata object, in bytes of JSON.
	MaxMessageMetadata = 16 << 10
	// MaxTopicName is the longest topic name.
	MaxTopicName = 200
)

// Message is the data of message.published: the message itself, which
// never changes. ConversationID is the message's own id when the publisher
// gave none and it has no parent; a follow-up inherits its parent's.
// Metadata is a JSON object, or empty. CreatedAt is RFC 3339 with
// nanoseconds, UTC.
type Message struct {
	ID             string          `json:"id"`
	Topic          string          `json:"topic"`
	Body           string          `json:"body"`
	ParentID       string          `json:"parent_id,omitempty"`
	ConversationID string          `json:"conversation_id"`
	Producer       string          `json:"producer,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	CreatedAt      string          `json:"created_at"`
	// Depth is how many routes lie between the message and a producer: 0
	// for a publisher's message, the job's depth + 1 for a message a route
	// published from a job's event; a worker's follow-up keeps its
	// parent's. The jobs a topic's routes make from it are that deep.
	Depth int `json:"depth,omitempty"`
}

// MessageClaim is the data of message.claimed: Group's claim of the
// message by Worker (the worker instance), under a lease until LeaseUntil
// (RFC 3339, nanoseconds, UTC). Fence is the message stream's version at
// the claim (the claim's own version): it only grows per message. Attempt
// counts the group's claims of the message, from 1.
type MessageClaim struct {
	Group      string `json:"group"`
	Worker     string `json:"worker"`
	Fence      int64  `json:"fence"`
	LeaseUntil string `json:"lease_until"`
	Attempt    int    `json:"attempt"`
}

// MessageLeaseRenewedData is the data of message.lease_renewed.
type MessageLeaseRenewedData struct {
	Group      string `json:"group"`
	Fence      int64  `json:"fence"`
	LeaseUntil string `json:"lease_until"`
}

// ClaimStatus is where a group's claim of a message stands.
type ClaimStatus string

// Claim statuses. Active is the only one a claim_ended never records.
const (
	ClaimActive    ClaimStatus = "active"
	ClaimCompleted ClaimStatus = "completed"
	ClaimFailed    ClaimStatus = "failed"
	ClaimTimedOut  ClaimStatus = "timed_out"
	// ClaimExpired: the lease ran out. With a follow-up (the dead letter)
	// the group is done with the message; without one the message may be
	// claimed again after the topic's backoff.
	ClaimExpired ClaimStatus = "expired"
)

// Finished reports whether a worker may end a claim with this status
// (completed, failed or timed_out).
func (s ClaimStatus) Finished() bool {
	switch s {
	case ClaimCompleted, ClaimFailed, ClaimTimedOut:
		return true
	}
	return false
}

// MessageClaimEndedData is the data of message.claim_ended: Group's claim
// under Fence ended with Status; FollowUpID is the message published in
// the same append (empty: none), Error what a failure or expiry says.
type MessageClaimEndedData struct {
	Group      string      `json:"group"`
	Worker     string      `json:"worker"`
	Fence      int64       `json:"fence"`
	Status     ClaimStatus `json:"status"`
	FollowUpID string      `json:"follow_up_id,omitempty"`
	Error      string      `json:"error,omitempty"`
}

// What a superseded message request was.
const (
	RefusedFinish = "finish"
	// RefusedRenew ("renew") is shared with job.superseded.
)

// MessageSupersededData is the data of message.superseded: what Worker of
// Group sent (Refused: renew or finish) with Fence, refused because the
// group's claim is now under CurrentFence (0: no claim of the group is
// active).
type MessageSupersededData struct {
	Refused      string `json:"refused"`
	Group        string `json:"group"`
	Worker       string `json:"worker"`
	Fence        int64  `json:"fence"`
	CurrentFence int64  `json:"current_fence,omitempty"`
}
