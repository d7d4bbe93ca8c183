package topicworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// Defaults of Options.
const (
	// DefaultLease is the lease a worker claims under when none is given.
	DefaultLease = 30 * time.Second
	// DefaultClaimWait is how long one claim waits for a message before it
	// asks again (the exchange bounds it: engine.MaxClaimWait).
	DefaultClaimWait = 30 * time.Second
	// DefaultShutdownGrace is how long a running command may go on once
	// the worker is told to stop, before its process group is killed.
	DefaultShutdownGrace = 30 * time.Second
	// finishTimeout bounds the call that records a follow-up.
	finishTimeout = 30 * time.Second
)

// Exchange is where a worker claims messages and records follow-ups: the
// local ledger's *engine.Engine, or a daemon's HTTP API (Client).
type Exchange interface {
	ClaimMessage(ctx context.Context, r engine.MessageClaimRequest) (*engine.ClaimedMessage, error)
	RenewMessage(ctx context.Context, id string, f engine.MessageFence, lease time.Duration) (time.Time, error)
	FinishMessage(ctx context.Context, id string, f engine.MessageFence, fu engine.FollowUp) (events.Message, error)
}

var _ Exchange = (*engine.Engine)(nil)

// Options configure a Worker.
type Options struct {
	Exchange Exchange
	Topics   Topics
	// Group is the worker group (default events.DefaultGroup); Worker is
	// this instance's name, recorded on its claims.
	Group, Worker string
	// Lease is what a claim and each renewal hold for (default DefaultLease).
	Lease time.Duration
	// Command runs once per message (its Timeout is the --timeout).
	Command Command
	// Once handles one message and returns.
	Once bool
	// ClaimWait is how long one claim waits (default DefaultClaimWait).
	ClaimWait time.Duration
	// ShutdownGrace is how long a running command may go on after the
	// worker is told to stop (default DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// Permanent says an exchange error will not go away by asking again
	// (bad credentials, a bad request): Run returns it. Nil: none is.
	Permanent func(error) bool
	// Log receives what the worker does; nil discards it.
	Log *slog.Logger
}

// ErrNoMessage is Run's answer in Once mode when the follow-up of its
// message was not recorded (dropped, or it stopped before one was
// claimed).
var ErrNoMessage = errors.New("no message was handled")

// Worker claims messages of one topic for one group, runs the command for
// each and records its follow-up.
type Worker struct {
	o   Options
	log *slog.Logger
	// Counts of what it did.
	handled, dropped, failed atomic.Int64
}

// New checks o and makes a Worker.
func New(o Options) (*Worker, error) {
	switch {
	case o.Exchange == nil:
		return nil, errors.New("no exchange to claim messages from")
	case o.Topics.Topic == "" || o.Topics.Success == "" || o.Topics.Failure == "":
		return nil, errors.New("give --topic, --success-topic and --failure-topic")
	case len(o.Command.Argv) == 0:
		return nil, errors.New("give the command to run after --: ductile worker --topic T … -- CMD [ARGS]")
	}
	if o.Group == "" {
		o.Group = events.DefaultGroup
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.ClaimWait <= 0 {
		o.ClaimWait = DefaultClaimWait
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	permanent := o.Permanent
	o.Permanent = func(err error) bool {
		// A claim the exchange refuses as invalid (a bad topic name, a
		// lease out of bounds) is refused again.
		return errors.Is(err, commands.ErrInvalidCommand) || (permanent != nil && permanent(err))
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Worker{o: o, log: log.With("topic", o.Topics.Topic, "group", o.Group, "worker", o.Worker)}, nil
}

// Snapshot is what the worker did so far: follow-ups recorded (of which
// failed: failure or timeout replies) and messages dropped (a stale fence,
// or the worker stopped before the command did).
func (w *Worker) Snapshot() (handled, failed, dropped int64) {
	return w.handled.Load(), w.failed.Load(), w.dropped.Load()
}

// Run claims and handles messages until ctx ends (or, with Once, one
// message is handled). A claim waits for a message with the exchange's
// wake-up (a long-poll), never a sleep loop; failed calls are retried
// after a growing, jittered wait. When ctx ends no more is claimed, and a
// running command gets ShutdownGrace to finish and have its follow-up
// recorded; past it, its process group is killed and the message is left
// to its lease (another worker claims it once it expires).
func (w *Worker) Run(ctx context.Context) error {
	var failures int
	for ctx.Err() == nil {
		c, err := w.o.Exchange.ClaimMessage(ctx, engine.MessageClaimRequest{Topic: w.o.Topics.Topic, Group: w.o.Group,
			Worker: w.o.Worker, Lease: w.o.Lease, Wait: w.o.ClaimWait})
		switch {
		case ctx.Err() != nil:
		case err != nil && w.o.Permanent(err):
			return fmt.Errorf("claim a message of %s: %w", w.o.Topics.Topic, err)
		case err != nil:
			failures++
			wait := backoff(failures)
			w.log.Warn("claim failed; trying again", "err", err, "in", wait)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		case c == nil:
			failures = 0
		default:
			failures = 0
			replied := w.handle(ctx, c)
			switch {
			case w.o.Once && replied:
				return nil
			case w.o.Once:
				return ErrNoMessage // its one message was dropped
			}
		}
	}
	if w.o.Once {
		return ErrNoMessage
	}
	return nil
}

// backoff is the wait before the next claim after failures in a row: full
// jitter over an exponential bound from 200 ms, capped at 10 s.
func backoff(failures int) time.Duration {
	bound := min(200*time.Millisecond<<min(failures-1, 10), 10*time.Second)
	return bound/2 + rand.N(bound/2+1)
}

// handle runs the command for c, renewing its lease meanwhile, and records
// the follow-up; it reports whether one was recorded.
func (w *Worker) handle(ctx context.Context, c *engine.ClaimedMessage) bool {
	m := c.Message
	log := w.log.With("message", m.ID, "conversation", m.ConversationID, "attempt", c.Attempt, "fence", c.Fence)
	log.Info("claimed")
	fence := engine.MessageFence{Group: c.Group, Worker: c.Worker, Fence: c.Fence}
	if fence.Group == "" {
		fence.Group = w.o.Group
	}
	if fence.Worker == "" {
		fence.Worker = w.o.Worker
	}
	// The command runs until it ends, the worker stops and the grace is
	// over, or its lease is lost.
	runCtx, stopRun := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopRun(nil)
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(w.o.ShutdownGrace, func() { stopRun(errShutdown) })
		context.AfterFunc(runCtx, func() { t.Stop() })
	})
	defer stopGrace()
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		w.renew(runCtx, m.ID, fence, log, stopRun)
	}()
	res := w.o.Command.Run(runCtx, Input{Body: m.Body, Metadata: m.Metadata, Vars: messageVars(c)})
	cause := context.Cause(runCtx)
	stopRun(nil)
	<-renewDone
	switch {
	case errors.Is(cause, errLeaseLost):
		w.dropped.Add(1)
		log.Warn("dropped: the lease was lost (another worker may have the message now)")
		return false
	case errors.Is(cause, errShutdown):
		w.dropped.Add(1)
		log.Warn("the worker stopped before the command finished: killed; the message is claimed again once its lease expires", "grace", w.o.ShutdownGrace)
		return false
	}
	fu := FollowUpOf(res, w.o.Topics)
	finishCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	out, err := w.o.Exchange.FinishMessage(finishCtx, m.ID, fence, engine.FollowUp{Status: fu.Status, Topic: fu.Topic, Body: fu.Body})
	switch {
	case errors.Is(err, commands.ErrStaleFence):
		w.dropped.Add(1)
		log.Warn("dropped: the follow-up was refused as stale (the lease expired and another worker has the message); not retried", "err", err)
		return false
	case err != nil:
		w.dropped.Add(1)
		log.Error("the follow-up could not be recorded; the message is claimed again once its lease expires", "err", err)
		return false
	}
	w.handled.Add(1)
	if fu.Status != StatusCompleted {
		w.failed.Add(1)
	}
	log.Info("replied", "status", fu.Status, "follow_up", out.ID, "follow_up_topic", fu.Topic, "exit_code", res.ExitCode,
		"duration_ms", res.Duration.Milliseconds())
	return true
}

var (
	errShutdown  = errors.New("the worker stopped")
	errLeaseLost = errors.New("the lease was lost")
)

// renew renews the lease every third of it until ctx ends; a stale fence
// stops the run (the message is no longer this worker's).
func (w *Worker) renew(ctx context.Context, id string, f engine.MessageFence, log *slog.Logger, stopRun context.CancelCauseFunc) {
	t := time.NewTicker(w.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := w.o.Exchange.RenewMessage(ctx, id, f, w.o.Lease)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, commands.ErrStaleFence):
			log.Warn("renewal refused as stale: stopping the command", "err", err)
			stopRun(errLeaseLost)
			return
		case err != nil:
			log.Warn("renewal failed; trying again at the next tick", "err", err)
		}
	}
}

// messageVars are the variables that name the message to the command.
func messageVars(c *engine.ClaimedMessage) map[string]string {
	m := c.Message
	return map[string]string{
		"DUCTILE_MESSAGE_ID":      m.ID,
		"DUCTILE_TOPIC":           m.Topic,
		"DUCTILE_CONVERSATION_ID": m.ConversationID,
		"DUCTILE_PARENT_ID":       m.ParentID,
		"DUCTILE_PRODUCER":        m.Producer,
		"DUCTILE_ATTEMPT":         fmt.Sprint(c.Attempt),
	}
}
