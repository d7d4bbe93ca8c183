package commands

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Replay runs a finished job's step again as a new job: the same plugin,
// command, payload, event envelope and context (baggage), the same parent
// and tree, with the attempt budget the caller gives (the config's today).
// It is one step: the new job carries no pipeline position, so no pipeline
// step follows it. The new job's job.enqueued names the old one
// (replay_of); the old one's stream gets job.replayed naming the new one.
// A job may be replayed any number of times.
type Replay struct {
	JobID       string       // the finished job
	NewJobID    string       // optional: assigned (UUIDv7) when empty
	Actor       events.Actor // the new job's submitted_by; events.ActorCLI when empty
	MaxAttempts int
	BackoffBase time.Duration
	Now         time.Time
}

// ReplayResult says what happened.
type ReplayResult struct {
	JobID    string `json:"job_id"` // the new job
	ReplayOf string `json:"replay_of"`
	Seq      int64  `json:"seq,omitempty"`
}

// CanReplay reports why a job cannot be replayed, or nil: only a finished
// (succeeded, dead or canceled) job can.
func CanReplay(j *Job) error {
	if !j.Terminal() {
		return &TransitionError{JobID: j.JobID, Status: j.Status, Action: "replay"}
	}
	return nil
}

// ReplayJob appends the new job and the old job's link to it in one
// decision, or nothing (a refusal).
func ReplayJob(ctx context.Context, l *ledger.Ledger, cmd Replay) (ReplayResult, error) {
	// Prepared from the job read outside the writer, as RetryJob does; the
	// decision folds it again.
	j, err := readToRedo(ctx, l, cmd.JobID, CanReplay)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("replay job: %w", err)
	}
	enq := cmd.enqueue(j)
	if err := enq.prepare(); err != nil {
		return ReplayResult{}, fmt.Errorf("replay job: %w", err)
	}
	res := ReplayResult{JobID: enq.JobID, ReplayOf: cmd.JobID}
	seqs, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		return cmd.decide(tx, j, enq)
	})
	if err != nil {
		return ReplayResult{}, fmt.Errorf("replay job: %w", err)
	}
	if len(seqs) > 0 {
		res.Seq = seqs[0]
	}
	return res, nil
}

func (cmd Replay) actor() events.Actor {
	return cmp.Or(cmd.Actor, events.ActorCLI)
}

// enqueue is the new job: the old one's step, without its dedupe key (a
// replay of a success would be dropped as its duplicate) and without its
// pipeline position (one step).
func (cmd Replay) enqueue(j *Job) Enqueue {
	return Enqueue{
		JobID: cmd.NewJobID, Plugin: j.Plugin, Command: j.Command, Payload: j.Payload, Event: j.Event,
		SubmittedBy: cmd.actor(), MaxAttempts: cmd.MaxAttempts, BackoffBase: cmd.BackoffBase,
		ParentJobID: j.ParentJobID, SourceEventID: j.SourceEventID, Correlation: j.Correlation, Depth: j.Depth,
		Context: j.Context, HookDepth: j.HookDepth, ReplayOf: j.JobID, Now: cmd.Now,
	}
}

func (cmd Replay) decide(tx *ledger.Tx, j *Job, enq Enqueue) ([]ledger.NewEvent, error) {
	if err := CanReplay(j); err != nil {
		return nil, err
	}
	evs, _, err := enq.decide(tx, nil)
	if err != nil {
		return nil, err
	}
	replayed := j.next(events.JobReplayed, events.Replayed{ReplayJobID: enq.JobID}, "", cmd.actor())
	return append(evs, replayed), nil
}
