package views

import (
	"context"
	"encoding/json"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// WaitRun waits until pipeline run runID has finished (its
// pipeline.run_finished), following the run's stream as this or another
// process appends to it, and returns how it finished. A run whose stream is
// empty yet is waited for all the same. It returns ctx's error if ctx ends
// first.
func WaitRun(ctx context.Context, l *ledger.Ledger, runID string) (events.RunFinishedData, error) {
	stream := events.RunStream(runID)
	// The head first: a run_finished the read below misses is after it.
	after, err := l.LastSeq(ctx)
	if err != nil {
		return events.RunFinishedData{}, contextError(ctx, err)
	}
	last, ok, err := lastOfType(ctx, l, stream, events.PipelineRunFinished)
	if err != nil {
		return events.RunFinishedData{}, contextError(ctx, err)
	}
	if ok {
		return runFinished(last)
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

// lastOfType is the newest event of type typ on stream, read alone.
func lastOfType(ctx context.Context, l *ledger.Ledger, stream, typ string) (ev ledger.Event, ok bool, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamLastOfType(conn, queries.ReadStreamLastOfTypeParams{Stream: stream, Type: typ},
			func(r queries.ReadStreamLastOfTypeRow) error {
				ev, ok = ledger.Event{Seq: r.Seq, Stream: r.Stream, Version: r.Version, Type: r.Type, Data: []byte(r.Data)}, true
				return nil
			})
	})
	return ev, ok, err
}

func runFinished(ev ledger.Event) (events.RunFinishedData, error) {
	var d events.RunFinishedData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return d, fmt.Errorf("read %s (seq %d): %w", ev.Type, ev.Seq, err)
	}
	return d, nil
}
