package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Start moves a queued, due job to running for its current attempt.
type Start struct {
	JobID   string
	Timeout time.Duration // the deadline recorded is Now+Timeout
	PID     int           // of the process that records the start
	// Worker is who runs the attempt (nil: not recorded).
	Worker *events.Worker
	// Plugin is the process group the attempt's plugin runs in, recorded
	// for recovery to end it (nil: no plugin process).
	Plugin *events.PluginProcess
	// LeasePeriod, when set, makes the start a remote worker's claim:
	// job.started records a lease for Worker until Now+LeasePeriod, with a
	// fence (Started.Lease).
	LeasePeriod time.Duration
	Now         time.Time
}

// Started is a job as it is once started, with its plugin's current state
// read from the ledger in the same transaction (so the plugin sees every
// state update committed before its start, with no projection lag).
type Started struct {
	*Job
	State json.RawMessage
	// Seq is the seq of the job.started appended.
	Seq int64
}

// StartJob appends job.started with the job stream's expected version, so
// no two workers can ever start the same attempt, and returns the job with
// its plugin's state. The start is a relaxed append (no fsync of its own):
// losing it to a power cut only means the job runs again, which
// at-least-once delivery allows, while waiting for a disk flush before every
// spawn would idle the worker.
func StartJob(ctx context.Context, l *ledger.Ledger, cmd Start) (Started, error) {
	var st Started
	seqs, err := l.Decide(ctx, ledger.Relaxed, cmd.decision(&st))
	if err != nil {
		return Started{}, fmt.Errorf("start job: %w", err)
	}
	if len(seqs) > 0 {
		st.Seq = seqs[0]
	}
	return st, nil
}

// decision is the start as the ledger runs it; it fills in st.
func (cmd Start) decision(st *Started) func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
	return func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		evs, err := cmd.decide(j)
		if err != nil {
			return nil, err
		}
		if st.State, err = storedState(tx, events.PluginStream(j.Plugin)); err != nil {
			return nil, err
		}
		st.Job = j
		return evs, nil
	}
}

func (cmd Start) decide(j *Job) ([]ledger.NewEvent, error) {
	if j.Status != events.StatusQueued {
		return nil, &TransitionError{JobID: j.JobID, Status: j.Status, Action: "start"}
	}
	if !j.NextRetryAt.IsZero() && j.NextRetryAt.After(cmd.Now) {
		return nil, fmt.Errorf("%w: job %s retries at %s", ErrNotDue, j.JobID, Time(j.NextRetryAt))
	}
	data := events.Started{Attempt: j.Attempt, DeadlineAt: Time(cmd.Now.Add(cmd.Timeout)), PID: cmd.PID, Worker: cmd.Worker, Plugin: cmd.Plugin}
	actor := events.ActorDispatcher
	if cmd.LeasePeriod > 0 {
		if cmd.Worker == nil || cmd.Worker.Name == "" {
			return nil, fmt.Errorf("%w: a claim of job %s names no worker", ErrInvalidCommand, j.JobID)
		}
		data.Lease, actor = leaseFor(j, cmd.Worker.Name, cmd.LeasePeriod, cmd.Now), events.ActorWorker
	}
	ev := j.next(events.JobStarted, data, "", actor)
	// j is now the job as its stream folds once ev is in (Started.Job).
	j.started()
	if data.Lease != nil {
		j.Lease, j.DeadlineAt = data.Lease, cmd.Now.Add(cmd.Timeout)
	}
	return []ledger.NewEvent{ev}, nil
}
