package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// RenewMessage extends the lease of the claim f holds on message id to
// now+lease (0: the service's lease period) and returns until when it
// holds. Renewals are coalesced (at most one message.lease_renewed per
// lease/3). A stale fence is recorded as message.superseded and returned
// as an error that unwraps to commands.ErrStaleFence (code stale_fence).
func (e *Engine) RenewMessage(ctx context.Context, id string, f MessageFence, lease time.Duration) (time.Time, error) {
	if lease <= 0 {
		lease = e.fleet.leasePeriod
	}
	if lease < config.MinLeasePeriod || lease > config.MaxLeasePeriod {
		return time.Time{}, fmt.Errorf("%w: renew message %s: a lease of %s: 1s to 1h", commands.ErrInvalidCommand, id, lease)
	}
	return commands.RenewMessage(ctx, e.ledger, commands.RenewMessageCmd{MessageID: id, MessageFence: f.commands(), Lease: lease, Now: e.fleet.Now()})
}

// FinishMessage ends the claim f holds on message id with u.Status
// (completed, failed or timed_out) and publishes the follow-up (u.Topic
// empty: none) in the same append: a child of the message in its
// conversation, produced by the group, with u.Metadata (empty: the
// message's). It returns the follow-up (zero: none). A stale fence — the
// lease ran out and another claim holds the message, or the claim ended
// already — is recorded as message.superseded and nothing is published:
// the error unwraps to commands.ErrStaleFence (code stale_fence).
func (e *Engine) FinishMessage(ctx context.Context, id string, f MessageFence, u FollowUp) (events.Message, error) {
	res, err := commands.FinishMessage(ctx, e.ledger, commands.FinishMessageCmd{MessageID: id, MessageFence: f.commands(),
		Status: events.ClaimStatus(u.Status), FollowUpTopic: u.Topic, Body: u.Body, Metadata: u.Metadata, Now: e.fleet.Now(),
		Error: finishError(u), Listeners: e.topicListeners()})
	if err != nil || res.FollowUp == nil {
		return events.Message{}, err
	}
	return *res.FollowUp, nil
}

// finishError is what claim_ended records as a failed or timed-out
// claim's error: the start of the follow-up's body.
func finishError(u FollowUp) string {
	if events.ClaimStatus(u.Status) == events.ClaimCompleted {
		return ""
	}
	const most = 200
	if len(u.Body) <= most {
		return u.Body
	}
	return u.Body[:most] + "…"
}

func (f MessageFence) commands() commands.MessageFence {
	group := f.Group
	if group == "" {
		group = events.DefaultGroup
	}
	return commands.MessageFence{Group: group, Worker: f.Worker, Fence: f.Fence}
}
