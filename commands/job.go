package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

var (
	// ErrJobNotFound means no job has that id.
	ErrJobNotFound = errors.New("job not found")
	// ErrInvalidTransition means the job's state does not allow the command
	// (the state machine of spec §3.3).
	ErrInvalidTransition = errors.New("invalid job state transition")
	// ErrNotDue means a queued job's retry time has not come yet.
	ErrNotDue = errors.New("job is not due yet")
	// ErrInvalidCommand wraps a command with bad parameters.
	ErrInvalidCommand = errors.New("invalid command")
)

// TransitionError says what was attempted on a job in which state (and,
// when it matters, on which attempt).
type TransitionError struct {
	JobID   string
	Status  events.Status
	Attempt int // 0: not part of the refusal
	Action  string
}

func (e *TransitionError) Error() string {
	if e.Attempt > 0 {
		return fmt.Sprintf("job %s is %s on attempt %d: cannot %s", e.JobID, e.Status, e.Attempt, e.Action)
	}
	return fmt.Sprintf("job %s is %s: cannot %s", e.JobID, e.Status, e.Action)
}

func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// Job is the aggregate folded from a job stream: what a decision needs.
type Job struct {
	events.Enqueued
	Version     int64  // the stream's version, for the next append
	Correlation string // the root job of its tree (meta.correlation_id)
	Status      events.Status
	Attempt     int
	LastError   string
	NextRetryAt time.Time // zero unless waiting for a retry
	RetriedAs   string    // the job that retries this one (job.retried), if any
	ReplayedAs  []string  // the jobs that replay this one (job.replayed), oldest first
	// Exports is how many export items (job.exported) the job has, every
	// attempt's: the next item is numbered Exports+1.
	Exports int
	// AttemptExports are the export item ids of the attempt ExportsAttempt,
	// in order: the run's result_refs when that attempt ends the job.
	AttemptExports []string
	ExportsAttempt int
	// Progress is the running attempt's last job.progressed (nil: none
	// since it started).
	Progress *events.Progressed
	// Lease is the remote worker's lease on the attempt last started, as
	// last renewed (nil: a local worker started it); it holds only while
	// the job is running or cancel requested (Leased).
	Lease *events.Lease
	// DeadlineAt is the deadline of a leased attempt (zero for a local one).
	DeadlineAt time.Time
}

// Leased is the lease a remote worker holds on the job's running attempt,
// or nil: the job is not running, or a local worker runs it.
func (j *Job) Leased() *events.Lease {
	if j.Status != events.StatusRunning && j.Status != events.StatusCancelRequested {
		return nil
	}
	return j.Lease
}

// Terminal reports whether the job can no longer change.
func (j *Job) Terminal() bool { return j.Status.Terminal() }

// FoldJob rebuilds a job from its events, oldest first.
func FoldJob(evs []ledger.Event) (*Job, error) {
	if len(evs) == 0 {
		return nil, ErrJobNotFound
	}
	j := &Job{}
	for _, ev := range evs {
		if err := foldJob(j, ev); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// foldJob folds the next event of its stream into j: FoldJob's step, and
// the job's fold for ledger.Fold.
func foldJob(j *Job, ev ledger.Event) error {
	if j.Version == 0 {
		// Its first event: the tree's correlation.
		if m, err := ev.Metadata(); err == nil {
			j.Correlation = m.CorrelationID
		}
	}
	if err := j.apply(ev); err != nil {
		return fmt.Errorf("fold %s v%d (%s): %w", ev.Stream, ev.Version, ev.Type, err)
	}
	j.Version = ev.Version
	return nil
}

func (j *Job) apply(ev ledger.Event) error {
	switch ev.Type {
	case events.JobEnqueued:
		if err := json.Unmarshal(ev.Data, &j.Enqueued); err != nil {
			return err
		}
		j.Status, j.Attempt = events.StatusQueued, 1
	case events.JobStarted:
		j.started()
		if bytes.Contains(ev.Data, leaseKey) {
			return j.leased(ev.Data)
		}
	case events.JobLeaseRenewed:
		var d events.LeaseRenewed
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		if j.Lease != nil && j.Lease.Fence == d.Fence {
			l := *j.Lease // an earlier fold may share it
			l.LeaseUntil = d.LeaseUntil
			j.Lease = &l
		}
	case events.JobSuperseded:
		// Refused and kept for forensics: it changes nothing.
	case events.JobSucceeded:
		j.Status, j.LastError = events.StatusSucceeded, ""
	case events.JobFailed, events.JobTimedOut:
		var d events.AttemptEnded
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.LastError = d.Error
		// The status moves on with the retry_scheduled or dead event that
		// always follows in the same append.
	case events.JobRetryScheduled:
		var d events.RetryScheduled
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		at, err := time.Parse(time.RFC3339Nano, d.NextRetryAt)
		if err != nil {
			return err
		}
		j.Status, j.Attempt, j.NextRetryAt = events.StatusQueued, d.Attempt, at
		if d.MaxAttempts > 0 {
			j.MaxAttempts = d.MaxAttempts
		}
	case events.JobDead:
		var d events.Dead
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.Status = events.StatusDead
		if j.LastError == "" {
			j.LastError = d.Reason
		}
	case events.JobRecovered:
		var d events.Recovered
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.Attempt, j.LastError = d.NextAttempt, d.Reason
		if d.Requeued {
			j.Status = events.StatusQueued
		}
	case events.JobStderrWritten:
		// Output of the running attempt: nothing a decision needs.
	case events.JobProgressed:
		var d events.Progressed
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.Progress = &d
	case events.JobExported:
		var d exportedID
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.exported(d.ExportItemID, d.Attempt)
	case events.JobCancelRequested:
		j.Status = events.StatusCancelRequested
	case events.JobCanceled:
		var d events.Canceled
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.Status = events.StatusCanceled
		if d.Reason != "" {
			j.LastError = d.Reason
		}
	case events.JobRetried:
		var d events.Retried
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.RetriedAs = d.RetryJobID
	case events.JobReplayed:
		var d events.Replayed
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		j.ReplayedAs = append(slices.Clip(j.ReplayedAs), d.ReplayJobID) // an earlier fold may share it
	default:
		return fmt.Errorf("unknown job event type %q", ev.Type)
	}
	return nil
}

// started is what job.started does to a job.
func (j *Job) started() {
	j.Status, j.NextRetryAt, j.Progress, j.Lease, j.DeadlineAt = events.StatusRunning, time.Time{}, nil, nil, time.Time{}
}

// leaseKey is in the data of a job.started that a remote worker's claim
// recorded: only those are decoded by the fold.
var leaseKey = []byte(`"lease":`)

// leased reads the lease and deadline of a remote claim's job.started.
func (j *Job) leased(data []byte) error {
	var d events.Started
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	if d.Lease == nil {
		return nil
	}
	deadline, err := time.Parse(time.RFC3339Nano, d.DeadlineAt)
	if err != nil {
		return err
	}
	j.Lease, j.DeadlineAt = d.Lease, deadline
	return nil
}

// exportedID is what the fold reads of job.exported (not the item's body,
// which may be 64 KiB of binary).
type exportedID struct {
	ExportItemID string `json:"export_item_id"`
	Attempt      int    `json:"attempt"`
}

// exported is what job.exported does to a job.
func (j *Job) exported(id string, attempt int) {
	j.Exports++
	if attempt != j.ExportsAttempt {
		j.AttemptExports, j.ExportsAttempt = nil, attempt
	}
	j.AttemptExports = append(slices.Clip(j.AttemptExports), id) // an earlier fold may share it
}

// ResultRefs are the run's final result set if the job ended now (spec
// §5.2): the export items of its current attempt, the one that ends it, in
// order; nil if it has none. Every event that ends a job carries them.
func (j *Job) ResultRefs() []string {
	if j.ExportsAttempt != j.Attempt || len(j.AttemptExports) == 0 {
		return nil
	}
	return slices.Clone(j.AttemptExports)
}

// LoadJob is a job as its stream folds, inside a decision.
func LoadJob(tx *ledger.Tx, id string) (*Job, error) {
	j, err := ledger.Fold(tx, events.JobStream(id), foldJob)
	if err != nil {
		return nil, err
	}
	if j.Version == 0 {
		return nil, fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	return &j, nil
}

// next builds an event for the job's stream at its next version, carrying
// the job tree's correlation id.
func (j *Job) next(typ string, data any, causation string, actor events.Actor) ledger.NewEvent {
	ev := ledger.NewEvent{
		Stream: events.JobStream(j.JobID), ExpectedVersion: j.Version, Type: typ, Data: data,
		Meta: ledger.Meta{CorrelationID: j.Correlation, CausationID: causation, Actor: actor},
	}
	j.Version++
	return ev
}

// Time formats times in event data: RFC 3339 with nanoseconds, UTC.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
