package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Cancel stops a job: a queued one is canceled at once; a running one gets
// a cancel request that the dispatcher acts on by terminating its process.
type Cancel struct {
	JobID  string
	Reason string
	Actor  events.Actor
	Now    time.Time
	// Pipelines moves the run of a canceled pipeline job on (nil: found
	// in the ledger; see Pipelines).
	Pipelines *Pipelines
}

// CancelJob appends the cancellation and returns the job's new status.
func CancelJob(ctx context.Context, l *ledger.Ledger, cmd Cancel) (events.Status, error) {
	var status events.Status
	_, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		var evs []ledger.NewEvent
		evs, status, err = cmd.decide(j)
		if err != nil || status != events.StatusCanceled || len(evs) == 0 {
			return evs, err
		}
		more, _, err := cmd.Pipelines.afterEnd(tx, j, &jobEnd{Status: status, Error: cmd.Reason, Now: cmd.Now})
		return append(evs, more...), err
	})
	if err != nil {
		return "", fmt.Errorf("cancel job: %w", err)
	}
	return status, nil
}

func (cmd Cancel) decide(j *Job) ([]ledger.NewEvent, events.Status, error) {
	actor := cmd.Actor
	if actor == "" {
		actor = events.ActorCLI
	}
	data := events.Canceled{Attempt: j.Attempt, Reason: cmd.Reason}
	if j.Status == events.StatusQueued {
		data.ResultRefs = j.ResultRefs() // it ends here
	}
	switch j.Status {
	case events.StatusQueued:
		evs := []ledger.NewEvent{j.next(events.JobCanceled, data, "", actor)}
		return append(evs, releaseKey(j, events.StatusCanceled, cmd.Now, actor)...), events.StatusCanceled, nil
	case events.StatusRunning:
		return []ledger.NewEvent{j.next(events.JobCancelRequested, data, "", actor)}, events.StatusCancelRequested, nil
	case events.StatusCancelRequested:
		return nil, j.Status, nil
	}
	return nil, j.Status, &TransitionError{JobID: j.JobID, Status: j.Status, Action: "cancel"}
}
