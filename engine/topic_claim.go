package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/queries"
)

// messageScan is how many messages of a topic one read of a claim looks
// at, oldest first; a claim reads on while it finds none it can take.
const messageScan = 32

// ClaimMessage claims the oldest claimable message of r.Topic for r.Group
// (FIFO by seq; r.Group empty: events.DefaultGroup) by r.Worker under a
// lease of r.Lease (0: the service's lease period). A message is claimable
// by a group until the group is done with it; one whose claim's lease ran
// out is claimable again after the topic's backoff, counted as a further
// attempt, and once topics.<name>.max_attempts claims of it expired the
// claim records its dead letter (<topic>.dead) instead and moves on: no
// sweeper is needed for either. With none claimable it waits up to r.Wait
// (at most MaxClaimWait) for one, woken by new commits (this process's or
// another's) and by the earliest backoff ahead, never polling a watched
// ledger, and returns nil, nil if none came. Two claims never get one
// message for one group: the claim is appended with the message stream's
// expected version.
func (e *Engine) ClaimMessage(ctx context.Context, r MessageClaimRequest) (*ClaimedMessage, error) {
	if !config.TopicName.MatchString(r.Topic) {
		return nil, fmt.Errorf("%w: claim from topic %q: a topic is 1 to %d of A-Z a-z 0-9 . _ : -", commands.ErrInvalidCommand, r.Topic, events.MaxTopicName)
	}
	if r.Worker == "" {
		return nil, fmt.Errorf("%w: claim from topic %s: name the worker instance that claims", commands.ErrInvalidCommand, r.Topic)
	}
	if r.Group == "" {
		r.Group = events.DefaultGroup
	}
	if r.Lease <= 0 {
		r.Lease = e.fleet.leasePeriod
	}
	if r.Lease < config.MinLeasePeriod || r.Lease > config.MaxLeasePeriod {
		return nil, fmt.Errorf("%w: claim from topic %s: a lease of %s: 1s to 1h", commands.ErrInvalidCommand, r.Topic, r.Lease)
	}
	wait := min(r.Wait, MaxClaimWait)
	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	for {
		changed := e.ledger.Changed() // taken before the read: no commit is missed
		if p := e.fleet.watcher(); p != nil {
			changed = p.Progressed() // what the claim reads is projected: wait for the projector
		}
		c, retryAt, err := e.claimMessageOnce(ctx, r)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err() // the read was interrupted
		}
		if c != nil || err != nil || wait <= 0 {
			return c, err
		}
		if done, err := e.waitForMessage(ctx, changed, retryAt, expired); done {
			return nil, err
		}
	}
}

// waitForMessage sleeps until changed is closed, the earliest backoff
// ahead (retryAt; zero: none) passes, or, with no watch on the ledger's
// file, a short poll; done is true when the claim's wait (expired) or ctx
// ended first.
func (e *Engine) waitForMessage(ctx context.Context, changed <-chan struct{}, retryAt time.Time, expired <-chan time.Time) (done bool, err error) {
	var due <-chan time.Time
	if !retryAt.IsZero() {
		t := time.NewTimer(max(0, retryAt.Sub(e.fleet.Now())))
		defer t.Stop()
		due = t.C
	}
	var polled <-chan time.Time
	if !e.ledger.Watching() && e.fleet.watcher() == nil {
		t := time.NewTimer(250 * time.Millisecond) // no watch on the file: other processes' commits are not seen otherwise
		defer t.Stop()
		polled = t.C
	}
	select {
	case <-changed:
	case <-due:
	case <-polled:
	case <-expired:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
	return false, nil
}

// claimMessageOnce claims the oldest message it can, or returns the
// earliest time one it skipped becomes claimable (zero: none will by
// time alone).
func (e *Engine) claimMessageOnce(ctx context.Context, r MessageClaimRequest) (*ClaimedMessage, time.Time, error) {
	topic := e.config.Topic(r.Topic)
	var retryAt time.Time
	sooner := func(t time.Time) {
		if retryAt.IsZero() || t.Before(retryAt) {
			retryAt = t
		}
	}
	after := int64(-1) // from the group's cursor
	for {
		var rows []queries.ListClaimableMessagesRow
		err := e.ledger.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
			if after < 0 {
				cursor, err := queries.TopicCursor(conn, queries.TopicCursorParams{Topic: r.Topic, WorkerGroup: r.Group})
				if err != nil && !errors.Is(err, queries.ErrNoRows) {
					return err
				}
				after = cursor
			}
			return queries.ListClaimableMessages(conn, queries.ListClaimableMessagesParams{WorkerGroup: r.Group, Topic: r.Topic,
				After: after, MaxRows: messageScan}, func(row queries.ListClaimableMessagesRow) error {
				rows = append(rows, row)
				return nil
			})
		})
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("claim from topic %s: %w", r.Topic, err)
		}
		now := e.fleet.Now()
		for _, row := range rows {
			after = row.Seq
			if row.LeaseUntil != nil && row.Attempts != nil {
				until, err := time.Parse(time.RFC3339Nano, *row.LeaseUntil)
				if err != nil {
					return nil, time.Time{}, fmt.Errorf("claim from topic %s: message %s: lease_until: %w", r.Topic, row.ID, err)
				}
				due := until
				if int(*row.Attempts) < topic.MaxAttempts {
					due = until.Add(topic.BackoffAfter(int(*row.Attempts)))
				}
				if now.Before(due) {
					sooner(due) // its lease holds, or its backoff has not passed
					continue
				}
			}
			c, err := e.claimMessage(ctx, r, row.ID, topic, now)
			if err != nil {
				return nil, time.Time{}, err
			}
			if c != nil {
				return c, time.Time{}, nil
			}
		}
		if len(rows) < messageScan {
			return nil, retryAt, nil
		}
	}
}

// claimMessage tries to claim message id; nil, nil if it is not claimable
// (another claim took it first, or it went to its dead letter).
func (e *Engine) claimMessage(ctx context.Context, r MessageClaimRequest, id string, topic config.TopicConfig, now time.Time) (*ClaimedMessage, error) {
	if !e.claiming.take(r.Group, id) {
		return nil, nil // a claim of this process is deciding on it
	}
	defer e.claiming.drop(r.Group, id)
	res, err := commands.ClaimMessage(ctx, e.ledger, commands.ClaimMessageCmd{MessageID: id, Group: r.Group, Worker: r.Worker, Lease: r.Lease,
		Now: now, MaxAttempts: topic.MaxAttempts, Backoff: topic.BackoffAfter})
	if err != nil {
		return nil, fmt.Errorf("claim from topic %s: %w", r.Topic, err)
	}
	if !res.Claimed {
		return nil, nil
	}
	e.fleet.leased(res.LeaseUntil) // the sweeper's timer
	return &ClaimedMessage{Message: res.Message, Group: r.Group, Worker: r.Worker, Fence: res.Fence, LeaseUntil: res.LeaseUntil,
		Attempt: res.Attempt}, nil
}

// claiming is the messages, per group, a claim of this Engine is deciding
// on: other claims of the process skip them rather than queue a decision
// that would find them taken.
type claiming struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (c *claiming) take(group, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := group + "\x00" + id
	if _, ok := c.ids[key]; ok {
		return false
	}
	if c.ids == nil {
		c.ids = map[string]struct{}{}
	}
	c.ids[key] = struct{}{}
	return true
}

func (c *claiming) drop(group, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ids, group+"\x00"+id)
}
