package commands

import (
	"context"
	"fmt"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// StderrLines records lines the plugin of a running attempt wrote to
// stderr (job.stderr_written), so that they can be read while it runs.
type StderrLines struct {
	JobID     string
	Attempt   int
	Line      int // the number of the first line among the attempt's stderr lines, from 1
	Lines     []events.StderrLine
	Truncated bool
	// Fence, when set, is the remote worker's lease the lines come with: a
	// stale one records job.superseded instead, and a *StaleFenceError is
	// returned.
	Fence *Fenced
}

// RecordStderr appends the lines. It is relaxed, like the start and
// the outcome: a power cut can lose it, and the attempt's outcome carries
// its stderr anyway.
func RecordStderr(ctx context.Context, l *ledger.Ledger, cmd StderrLines) error {
	var stale *StaleFenceError
	_, err := l.Decide(ctx, ledger.Relaxed, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		if cmd.Fence != nil {
			var superseded []ledger.NewEvent
			if superseded, stale = cmd.Fence.checkFence(j, events.RefusedLog, ""); stale != nil {
				return superseded, nil
			}
		}
		return cmd.decide(j)
	})
	if err != nil {
		return fmt.Errorf("record stderr: %w", err)
	}
	if stale != nil {
		return fmt.Errorf("record stderr: %w", stale)
	}
	return nil
}

func (cmd StderrLines) decide(j *Job) ([]ledger.NewEvent, error) {
	if (j.Status != events.StatusRunning && j.Status != events.StatusCancelRequested) || j.Attempt != cmd.Attempt {
		return nil, &TransitionError{JobID: j.JobID, Status: j.Status, Attempt: j.Attempt, Action: fmt.Sprintf("record stderr of attempt %d", cmd.Attempt)}
	}
	if len(cmd.Lines) == 0 && !cmd.Truncated {
		return nil, nil
	}
	data := events.StderrWritten{Attempt: cmd.Attempt, Line: cmd.Line, Lines: cmd.Lines, Truncated: cmd.Truncated}
	if data.Lines == nil {
		data.Lines = []events.StderrLine{}
	}
	return []ledger.NewEvent{j.next(events.JobStderrWritten, data, "", events.ActorDispatcher)}, nil
}
