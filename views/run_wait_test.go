package views_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// appendRun appends events of run id's stream, at version+1 onward.
func (b *testBundle) appendRun(t *testing.T, id string, version int64, evs ...ledger.NewEvent) {
	t.Helper()
	for i := range evs {
		evs[i].Stream, evs[i].ExpectedVersion = events.RunStream(id), version+int64(i)
	}
	_, err := b.l.Append(b.ctx, evs...)
	require.NoError(t, err)
}

func runStarted(id string) ledger.NewEvent {
	return ledger.NewEvent{Type: events.PipelineRunStarted, Data: events.RunStartedData{RunID: id, Pipeline: "p", JobID: "job-" + id}}
}

func runFinished(id string, status events.RunStatus) ledger.NewEvent {
	return ledger.NewEvent{Type: events.PipelineRunFinished, Data: events.RunFinishedData{RunID: id, Status: status,
		Results: []events.RunResult{{JobID: "job-" + id, Node: "n", Plugin: "echo", Command: "handle", Status: events.StatusSucceeded, Result: json.RawMessage(`{"ok":true}`)}}}}
}

// TestWaitRunFinishedBefore: a run that has finished is returned at once,
// with its results.
func TestWaitRunFinishedBefore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.appendRun(t, "r1", 0, runStarted("r1"), runFinished("r1", events.RunFailed))
	got, err := views.WaitRun(b.ctx, b.l, "r1")
	require.NoError(t, err)
	require.Equal(t, "r1", got.RunID)
	require.Equal(t, events.RunFailed, got.Status)
	require.Len(t, got.Results, 1)
	require.JSONEq(t, `{"ok":true}`, string(got.Results[0].Result))
}

// TestWaitRunFinishedWhileWaiting: a wait goes past other runs' events and
// its run's progress and returns the run's end; a run whose start is not
// recorded yet is waited for too.
func TestWaitRunFinishedWhileWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.appendRun(t, "r1", 0, runStarted("r1"))
	done := make(chan events.RunFinishedData, 2)
	fail := make(chan error, 2)
	for _, id := range []string{"r1", "r2"} {
		go func() {
			got, err := views.WaitRun(b.ctx, b.l, id)
			if err != nil {
				fail <- err
				return
			}
			done <- got
		}()
	}
	b.appendRun(t, "other", 0, runStarted("other"), runFinished("other", events.RunSucceeded))
	b.appendRun(t, "r1", 1, ledger.NewEvent{Type: "test.progress", Data: map[string]any{"run_id": "r1"}})
	b.appendRun(t, "r1", 2, runFinished("r1", events.RunSucceeded))
	b.appendRun(t, "r2", 0, runStarted("r2"), runFinished("r2", events.RunFailed))
	got := map[string]events.RunStatus{}
	for range 2 {
		select {
		case d := <-done:
			got[d.RunID] = d.Status
		case err := <-fail:
			t.Fatal(err)
		}
	}
	require.Equal(t, map[string]events.RunStatus{"r1": events.RunSucceeded, "r2": events.RunFailed}, got)
}

// TestWaitRunEndsWithItsContext: a wait for a run that does not finish
// ends with its context's error.
func TestWaitRunEndsWithItsContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.appendRun(t, "r1", 0, runStarted("r1"))
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := views.WaitRun(ctx, b.l, "r1")
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestWaitRunReadsTheNewestEnd: WaitRun reads the stream's newest
// run_finished (one read of the last event of that type), not the stream.
func TestWaitRunReadsTheNewestEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.appendRun(t, "r9", 0, runStarted("r9"), runFinished("r9", events.RunFailed), runFinished("r9", events.RunSucceeded))
	got, err := views.WaitRun(b.ctx, b.l, "r9")
	require.NoError(t, err)
	require.Equal(t, events.RunSucceeded, got.Status)
}
