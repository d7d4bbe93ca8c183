package engine

import (
	"encoding/json"
	"time"

	"github.com/ductile/ductile/events"
)

// Publish is a message to publish to a topic. ConversationID is inherited
// from the parent when ParentID is given and it is empty; without either
// the message starts its own conversation (its own id). Metadata is a JSON
// object or empty. DryRun checks and builds the message without recording
// it.
type Publish struct {
	Topic          string
	Body           string
	ParentID       string
	ConversationID string
	Producer       string
	Metadata       json.RawMessage
	DryRun         bool
	// Actor is who publishes, recorded in the event's meta (default
	// events.ActorCLI; the HTTP API passes events.ActorAPI).
	Actor events.Actor
}

// MessageClaimRequest asks for the oldest message of Topic that Group has
// not had (Group empty: events.DefaultGroup), for Worker (the worker
// instance) under a lease of Lease (0: service.lease_period; 1s to 1h).
// With none claimable it waits up to Wait (bounded by MaxClaimWait) for one.
type MessageClaimRequest struct {
	Topic  string
	Group  string
	Worker string
	Lease  time.Duration
	Wait   time.Duration
}

// ClaimedMessage is a message a worker claimed and the lease it holds it
// under: Fence goes back with every renewal and the finish.
type ClaimedMessage struct {
	Message    events.Message `json:"message"`
	Group      string         `json:"group"`
	Worker     string         `json:"worker"`
	Fence      int64          `json:"fence"`
	LeaseUntil time.Time      `json:"lease_until"`
	Attempt    int            `json:"attempt"`
}

// MessageFence is what a worker sends with a renewal or a finish: its
// group, its instance and the fence of its claim.
type MessageFence struct {
	Group  string `json:"group"`
	Worker string `json:"worker"`
	Fence  int64  `json:"fence"`
}

// FollowUp is how a claim ends: Status (completed, failed or timed_out) and
// the follow-up message to publish in the same append, to Topic with Body
// (Topic empty: none). Metadata empty: the claimed message's is kept.
type FollowUp struct {
	Status   string          `json:"status"`
	Topic    string          `json:"topic"`
	Body     string          `json:"body"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}
