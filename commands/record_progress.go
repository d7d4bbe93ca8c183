package commands

import (
	"context"
	"fmt"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Progress records a running attempt's progress, stage or message
// (job.progressed). Its data is the attempt's whole progress as it stands
// (the reporter merges a plugin's lines into it), not a change.
type Progress struct {
	JobID    string
	Attempt  int
	Progress events.Progressed
}

// RecordProgress appends the progress. It is relaxed, like stderr lines:
// a power cut can lose one, and the next (or the last, written before the
// attempt's outcome) replaces it. A job that is not running that attempt
// (it ended, or moved on to another) refuses it with a *TransitionError:
// a line that came too late, which the caller drops.
func RecordProgress(ctx context.Context, l *ledger.Ledger, cmd Progress) error {
	_, err := l.Decide(ctx, ledger.Relaxed, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		return cmd.decide(j)
	})
	if err != nil {
		return fmt.Errorf("record progress: %w", err)
	}
	return nil
}

func (cmd Progress) decide(j *Job) ([]ledger.NewEvent, error) {
	if err := runningAttempt(j, cmd.Attempt, "record progress"); err != nil {
		return nil, err
	}
	p := cmd.Progress
	p.Attempt = cmd.Attempt
	if p.Progress != nil && (*p.Progress < 0 || *p.Progress > 1) {
		return nil, fmt.Errorf("%w: progress %v is outside [0, 1]", ErrInvalidCommand, *p.Progress)
	}
	return []ledger.NewEvent{j.next(events.JobProgressed, p, "", events.ActorDispatcher)}, nil
}

// runningAttempt refuses, with a *TransitionError, a report on a job that is
// not running attempt (running, or asked to cancel and not yet stopped).
func runningAttempt(j *Job, attempt int, action string) error {
	if (j.Status != events.StatusRunning && j.Status != events.StatusCancelRequested) || j.Attempt != attempt {
		return &TransitionError{JobID: j.JobID, Status: j.Status, Attempt: j.Attempt, Action: fmt.Sprintf("%s of attempt %d", action, attempt)}
	}
	return nil
}
