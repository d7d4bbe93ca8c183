package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Start moves a queued, due job to running for its current attempt.
type Start struct {
	JobID   string
	Timeout time.Duration // the deadline recorded is Now+Timeout
	PID     int
	Now     time.Time
}

// StartJob appends job.started with the job stream's expected version, so
// no two workers can ever start the same attempt. It returns the job as it
// is once started.
func StartJob(ctx context.Context, l *ledger.Ledger, cmd Start) (*Job, error) {
	var job *Job
	_, err := l.Decide(ctx, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		evs, err := cmd.decide(j)
		job = j
		return evs, err
	})
	if err != nil {
		return nil, fmt.Errorf("start job: %w", err)
	}
	return job, nil
}

func (cmd Start) decide(j *Job) ([]ledger.NewEvent, error) {
	if j.Status != events.StatusQueued {
		return nil, &TransitionError{JobID: j.JobID, Status: j.Status, Action: "start"}
	}
	if !j.NextRetryAt.IsZero() && j.NextRetryAt.After(cmd.Now) {
		return nil, fmt.Errorf("%w: job %s retries at %s", ErrNotDue, j.JobID, Time(j.NextRetryAt))
	}
	ev := j.next(events.JobStarted, events.Started{Attempt: j.Attempt, DeadlineAt: Time(cmd.Now.Add(cmd.Timeout)), PID: cmd.PID}, "", "dispatcher")
	j.Status = events.StatusRunning
	return []ledger.NewEvent{ev}, nil
}
