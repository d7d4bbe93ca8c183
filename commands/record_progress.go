package commands

import (
	"context"
	"fmt"
	"math"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// The caps of a progress report: a longer message or stage is refused here
// (engine.RunReport cuts a plugin's to fit).
const (
	MaxProgressMessage = 4 << 10
	MaxProgressStage   = 256
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
	if err := CheckProgress(p); err != nil {
		return nil, err
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

// CheckProgress refuses a progress outside [0, 1] (or not a number), a
// message or a stage over its cap, wrapping ErrInvalidCommand.
func CheckProgress(p events.Progressed) error {
	switch {
	case p.Progress != nil && (math.IsNaN(*p.Progress) || *p.Progress < 0 || *p.Progress > 1):
		return fmt.Errorf("%w: progress %v is outside [0, 1]", ErrInvalidCommand, *p.Progress)
	case len(p.Message) > MaxProgressMessage:
		return fmt.Errorf("%w: progress message is %d bytes; at most %d", ErrInvalidCommand, len(p.Message), MaxProgressMessage)
	case len(p.Stage) > MaxProgressStage:
		return fmt.Errorf("%w: progress stage is %d bytes; at most %d", ErrInvalidCommand, len(p.Stage), MaxProgressStage)
	}
	return nil
}
