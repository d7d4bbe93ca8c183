package views

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// WaitRun waits until pipeline run runID has finished (its
// pipeline.run_finished), following the run's stream as this or another
// process appends to it, and returns how it finished. A run whose stream is
// empty yet is waited for all the same. It returns ctx's error if ctx ends
// first.
func WaitRun(ctx context.Context, l *ledger.Ledger, runID string) (events.RunFinishedData, error) {
	stream := events.RunStream(runID)
	evs, err := l.ReadStream(ctx, stream)
	if err != nil {
		return events.RunFinishedData{}, contextError(ctx, err)
	}
	var after int64
	for _, ev := range evs {
		if ev.Type == events.PipelineRunFinished {
			return runFinished(ev)
		}
		after = ev.Seq
	}
	var finished *ledger.Event
	_, err = l.Follow(ctx, after, ledger.Filter{Stream: stream, Type: events.PipelineRunFinished}, func(ev ledger.Event) error {
		finished = &ev
		return ledger.ErrStopFollowing
	})
	if err != nil {
		return events.RunFinishedData{}, err
	}
	return runFinished(*finished)
}

func runFinished(ev ledger.Event) (events.RunFinishedData, error) {
	var d events.RunFinishedData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return d, fmt.Errorf("read %s (seq %d): %w", ev.Type, ev.Seq, err)
	}
	return d, nil
}
