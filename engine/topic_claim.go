package engine

import (
	"context"
	"time"

	"github.com/ductile/ductile/events"
)

// ClaimMessage claims the oldest claimable message of r.Topic for r.Group
// (FIFO by seq), or returns nil, nil when none came within r.Wait.
func (e *Engine) ClaimMessage(ctx context.Context, r MessageClaimRequest) (*ClaimedMessage, error) {
	return nil, errTopicsNotBuilt
}

// RenewMessage extends the lease of the claim f holds on message id by
// lease from now and returns until when it holds.
func (e *Engine) RenewMessage(ctx context.Context, id string, f MessageFence, lease time.Duration) (time.Time, error) {
	return time.Time{}, errTopicsNotBuilt
}

// FinishMessage ends the claim f holds on message id and publishes the
// follow-up in the same append; it returns the follow-up.
func (e *Engine) FinishMessage(ctx context.Context, id string, f MessageFence, u FollowUp) (events.Message, error) {
	return events.Message{}, errTopicsNotBuilt
}

// SweepMessages ends the claims whose lease ran out by now (dead letters
// when their attempts are used up) and returns when to sweep next (zero:
// no claim is active).
func (e *Engine) SweepMessages(ctx context.Context, now time.Time) (time.Time, error) {
	return time.Time{}, errTopicsNotBuilt
}
