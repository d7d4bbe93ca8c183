package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// The topic exchange's routes (docs/topics-cli.md), for a remote CLI
// (topics:ro / topics:rw) and a remote topic worker (worker).

// PublishRequest is POST /topics/{topic}/messages's body.
type PublishRequest struct {
	Body           string          `json:"body"`
	ParentID       string          `json:"parent_id,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	Producer       string          `json:"producer,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	DryRun         bool            `json:"dry_run,omitempty"`
}

// Publish publishes p to topic and returns the message.
func (c *Client) Publish(ctx context.Context, topic string, p PublishRequest) (events.Message, error) {
	var out events.Message
	_, err := c.Do(ctx, http.MethodPost, "/topics/"+url.PathEscape(topic)+"/messages", nil, p, &out)
	return out, err
}

// ClaimRequest is POST /worker/topics/{topic}/claim's body.
type ClaimRequest struct {
	Group   string `json:"group,omitempty"`
	Worker  string `json:"worker"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
	WaitMS  int64  `json:"wait_ms,omitempty"`
}

// RenewRequest is POST /worker/messages/{id}/renew's body.
type RenewRequest struct {
	engine.MessageFence
	LeaseMS int64 `json:"lease_ms,omitempty"`
}

// Renewed is the answer to a renewal.
type Renewed struct {
	LeaseUntil time.Time `json:"lease_until"`
}

// FinishRequest is POST /worker/messages/{id}/finish's body.
type FinishRequest struct {
	engine.MessageFence
	engine.FollowUp
}

// ClaimMessage claims the oldest claimable message of r.Topic for r.Group,
// waiting up to r.Wait: nil, nil when none came.
func (c *Client) ClaimMessage(ctx context.Context, r engine.MessageClaimRequest) (*engine.ClaimedMessage, error) {
	var out engine.ClaimedMessage
	got, err := c.Do(ctx, http.MethodPost, "/worker/topics/"+url.PathEscape(r.Topic)+"/claim", nil,
		ClaimRequest{Group: r.Group, Worker: r.Worker, LeaseMS: r.Lease.Milliseconds(), WaitMS: r.Wait.Milliseconds()}, &out)
	if err != nil || !got {
		return nil, err
	}
	return &out, nil
}

// RenewMessage renews the lease f holds on message id for lease from now.
func (c *Client) RenewMessage(ctx context.Context, id string, f engine.MessageFence, lease time.Duration) (time.Time, error) {
	var out Renewed
	_, err := c.Do(ctx, http.MethodPost, "/worker/messages/"+url.PathEscape(id)+"/renew", nil,
		RenewRequest{MessageFence: f, LeaseMS: lease.Milliseconds()}, &out)
	return out.LeaseUntil, err
}

// FinishMessage ends the claim f holds on message id and publishes its
// follow-up; it returns the follow-up.
func (c *Client) FinishMessage(ctx context.Context, id string, f engine.MessageFence, u engine.FollowUp) (events.Message, error) {
	var out events.Message
	_, err := c.Do(ctx, http.MethodPost, "/worker/messages/"+url.PathEscape(id)+"/finish", nil, FinishRequest{MessageFence: f, FollowUp: u}, &out)
	return out, err
}
