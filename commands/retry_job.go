package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// ErrAlreadyRetried means the job was retried already: retry the job that
// retries it instead.
var ErrAlreadyRetried = errors.New("job already retried")

// RetriedError names the job that already retries a job.
type RetriedError struct {
	JobID      string
	RetryJobID string
}

func (e *RetriedError) Error() string {
	return fmt.Sprintf("job %s was retried already, as job %s", e.JobID, e.RetryJobID)
}

func (e *RetriedError) Unwrap() error { return ErrAlreadyRetried }

// Retry enqueues a dead or canceled job again as a new job: the same
// plugin, command, payload, event envelope, dedupe key, parent and tree,
// context (baggage), hook depth, task and trace ids, one step further along
// its retry chain (root_run_id, attempt), but not its pipeline step (a retry of a
// pipeline job runs that one step, as a replay does), with the attempt
// budget the caller gives (the config's today). The new job's job.enqueued
// names the old one (retry_of); the old one's stream gets job.retried
// naming the new one, so a job is retried at most once.
type Retry struct {
	JobID            string       // the dead or canceled job
	NewJobID         string       // optional: assigned (UUIDv7) when empty
	Actor            events.Actor // the new job's submitted_by; events.ActorCLI when empty
	MaxAttempts      int
	BackoffBase      time.Duration
	DefaultDedupeTTL time.Duration
	Now              time.Time
}

// RetryResult says what happened.
type RetryResult struct {
	JobID   string `json:"job_id"` // the new job
	RetryOf string `json:"retry_of"`
	Deduped bool   `json:"deduped"`
	// ExistingJobID is the job that made the retry a duplicate (its dedupe key).
	ExistingJobID string `json:"existing_job_id,omitempty"`
	Seq           int64  `json:"seq,omitempty"`
}

// CanRetry reports why a job cannot be retried, or nil: only a dead or
// canceled job can, once.
func CanRetry(j *Job) error {
	switch {
	case j.Status != events.StatusDead && j.Status != events.StatusCanceled:
		return &TransitionError{JobID: j.JobID, Status: j.Status, Action: "retry"}
	case j.RetriedAs != "":
		return &RetriedError{JobID: j.JobID, RetryJobID: j.RetriedAs}
	}
	return nil
}

// RetryJob appends the new job and the old job's link to it in one
// decision, or nothing (a refusal, or a retry dropped by its dedupe key).
func RetryJob(ctx context.Context, l *ledger.Ledger, cmd Retry) (RetryResult, error) {
	// The new job is prepared from the old one read outside the writer (a
	// large payload is encoded here, not on the writer's goroutine); the
	// decision folds it again, and only job.retried can have changed it.
	j, err := readToRedo(ctx, l, cmd.JobID, CanRetry)
	if err != nil {
		return RetryResult{}, fmt.Errorf("retry job: %w", err)
	}
	enq := cmd.enqueue(j)
	if err := enq.prepare(); err != nil {
		return RetryResult{}, fmt.Errorf("retry job: %w", err)
	}
	res := RetryResult{RetryOf: cmd.JobID}
	seqs, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		var evs []ledger.NewEvent
		evs, res, err = cmd.decide(tx, j, enq)
		return evs, err
	})
	if err != nil {
		return RetryResult{}, fmt.Errorf("retry job: %w", err)
	}
	if len(seqs) > 0 {
		res.Seq = seqs[0]
	}
	return res, nil
}

func (cmd Retry) actor() events.Actor {
	return cmp.Or(cmd.Actor, events.ActorCLI)
}

// enqueue is the new job: the old one's immutable part, with the given
// attempt budget.
func (cmd Retry) enqueue(j *Job) Enqueue {
	return Enqueue{
		JobID: cmd.NewJobID, Plugin: j.Plugin, Command: j.Command, Payload: j.Payload, Event: j.Event,
		SubmittedBy: cmd.actor(), MaxAttempts: cmd.MaxAttempts, BackoffBase: cmd.BackoffBase,
		DedupeKey: j.DedupeKey, DedupeTTL: time.Duration(j.DedupeTTLMS) * time.Millisecond, DefaultDedupeTTL: cmd.DefaultDedupeTTL,
		ParentJobID: j.ParentJobID, SourceEventID: j.SourceEventID, Correlation: j.Correlation, Depth: j.Depth,
		Context: j.Context, HookDepth: j.HookDepth, RetryOf: j.JobID, Now: cmd.Now,
		TaskID: j.TaskID, TraceID: j.TraceID, RootJobID: cmp.Or(j.RootJobID, j.JobID), RunAttempt: max(j.RunAttempt, 1) + 1,
	}
}

func (cmd Retry) decide(tx *ledger.Tx, j *Job, enq Enqueue) ([]ledger.NewEvent, RetryResult, error) {
	res := RetryResult{RetryOf: j.JobID}
	if err := CanRetry(j); err != nil {
		return nil, res, err
	}
	evs, enqueued, err := enq.decide(tx, nil)
	if err != nil {
		return nil, res, err
	}
	res.JobID, res.Deduped, res.ExistingJobID = enqueued.JobID, enqueued.Deduped, enqueued.ExistingJobID
	if enqueued.Deduped {
		return nil, res, nil // nothing retries it: it may be retried later
	}
	retried := j.next(events.JobRetried, events.Retried{RetryJobID: enqueued.JobID}, "", cmd.actor())
	return append(evs, retried), res, nil
}

// readToRedo is job id as its stream folds now, read outside the writer,
// if can allows it: what a retry or a replay prepares its new job from
// (their decisions fold it again).
func readToRedo(ctx context.Context, l *ledger.Ledger, id string, can func(*Job) error) (*Job, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, err
	}
	j, err := FoldJob(evs)
	if errors.Is(err, ErrJobNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return j, can(j)
}
