package views

import (
	"context"
	"encoding/json"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// WaitJob waits until job id is terminal (succeeded, dead or canceled),
// following its stream, the source of truth, as this or another process
// appends to it, and returns the job and the end of its last attempt (zero
// if none ended). It returns ctx's error if ctx ends first.
func WaitJob(ctx context.Context, l *ledger.Ledger, id string) (*commands.Job, events.AttemptEnded, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, events.AttemptEnded{}, contextError(ctx, err)
	}
	j, err := commands.FoldJob(evs)
	if err != nil {
		return nil, events.AttemptEnded{}, err
	}
	if !j.Terminal() {
		_, err = l.Follow(ctx, evs[len(evs)-1].Seq, ledger.Filter{Stream: events.JobStream(id)}, func(ev ledger.Event) error {
			evs = append(evs, ev)
			switch ev.Type {
			case events.JobSucceeded, events.JobDead, events.JobCanceled: // the events that end a job
				if j, err = commands.FoldJob(evs); err != nil {
					return err
				}
				if j.Terminal() {
					return ledger.ErrStopFollowing
				}
			}
			return nil
		})
		if err != nil {
			return nil, events.AttemptEnded{}, err
		}
	}
	return j, lastAttempt(evs), nil
}

// lastAttempt is the end of the last attempt among a job's events.
func lastAttempt(evs []ledger.Event) events.AttemptEnded {
	var last events.AttemptEnded
	for _, ev := range evs {
		switch ev.Type {
		case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
			_ = json.Unmarshal(ev.Data, &last)
		}
	}
	return last
}
