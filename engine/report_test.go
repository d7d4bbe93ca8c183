package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// running enqueues a job of echo poll and starts its first attempt.
func (f *fixture) running(t testing.TB) string {
	t.Helper()
	res, err := f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "poll", By: events.ActorAPI})
	require.NoError(t, err)
	_, err = commands.StartJob(f.ctx, f.l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	return res.JobID
}

// progressed are the job.progressed events of job id.
func (f *fixture) progressed(t *testing.T, id string) ([]ledger.Event, []events.Progressed) {
	t.Helper()
	evs, err := f.l.ReadStream(f.ctx, events.JobStream(id))
	require.NoError(t, err)
	var out []ledger.Event
	var data []events.Progressed
	for _, ev := range evs {
		if ev.Type == events.JobProgressed {
			var p events.Progressed
			require.NoError(t, json.Unmarshal(ev.Data, &p))
			out, data = append(out, ev), append(data, p)
		}
	}
	return out, data
}

func pct(v float64) *float64 { return &v }

// Progress lines reported for over two seconds become at most one
// job.progressed per second plus the last value, written by Close: the
// events stand for every line (Lines adds up), each holds the merged
// progress (a stage given once stays), and the last holds the last line's
// value.
func TestRunReportCoalesces(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	id := f.running(t)
	r := f.eng.Report(id, 1)
	r.Progress(events.Progressed{Stage: "download"})
	n, began := 0, time.Now()
	for time.Since(began) < 2*engine.ProgressInterval+200*time.Millisecond {
		n++
		r.Progress(events.Progressed{Progress: pct(float64(n%1000) / 1000)})
		time.Sleep(time.Millisecond)
	}
	r.Progress(events.Progressed{Progress: pct(1)})
	r.Close(f.ctx)
	r.Progress(events.Progressed{Progress: pct(0)}) // after Close: dropped
	evs, data := f.progressed(t, id)
	require.NotEmpty(t, evs)
	lines := 0
	for i, p := range data {
		lines += p.Lines
		require.Equal(t, "download", p.Stage)
		require.Equal(t, 1, p.Attempt)
		if i > 0 && i < len(evs)-1 {
			require.GreaterOrEqual(t, evs[i].RecordedAt.Sub(evs[i-1].RecordedAt), engine.ProgressInterval,
				"events %d and %d of the writer", i-1, i)
		}
	}
	require.Equal(t, n+2, lines)
	require.GreaterOrEqual(t, len(evs), 3, "the writer wrote while the lines came")
	require.LessOrEqual(t, len(evs), int(time.Since(began)/engine.ProgressInterval)+2)
	require.Equal(t, 1.0, *data[len(data)-1].Progress)
}

// While the ledger's writer is held, Progress still returns at once (the
// plugin's reader never waits on the ledger); once it is free, Close
// writes the latest value.
func TestRunReportNeverBlocks(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	id := f.running(t)
	r := f.eng.Report(id, 1)

	held, release := make(chan struct{}), make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		_, err := f.l.Decide(context.Background(), ledger.Durable, func(*ledger.Tx) ([]ledger.NewEvent, error) {
			close(held)
			<-release
			return nil, nil
		})
		writerDone <- err
	}()
	<-held
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		for i := 1; i <= 10000; i++ {
			r.Progress(events.Progressed{Progress: pct(float64(i) / 10000), Message: "working"})
		}
	}()
	select {
	case <-reported:
	case <-time.After(30 * time.Second):
		t.Fatal("Progress blocked while the ledger's writer was held")
	}
	close(release)
	require.NoError(t, <-writerDone)
	r.Close(f.ctx)
	_, data := f.progressed(t, id)
	require.NotEmpty(t, data)
	require.LessOrEqual(t, len(data), 3, "a held writer coalesces everything reported meanwhile")
	require.Equal(t, 1.0, *data[len(data)-1].Progress)
	require.Equal(t, "working", data[len(data)-1].Message)
}

// A progress line after the job ended is dropped (logged, no event, no
// error for the plugin); an export item is refused with the transition
// error; a report whose attempt ended writes nothing on Close.
func TestRunReportAfterTheEnd(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	id := f.running(t)
	r := f.eng.Report(id, 1)
	item, err := r.Export(f.ctx, events.Exported{Type: events.ExportText, Text: "partial"})
	require.NoError(t, err)
	require.Equal(t, id+":1", item.ExportItemID)
	_, err = r.Export(f.ctx, events.Exported{Type: events.ExportBinary, Binary: make([]byte, commands.MaxExportBinary+1)})
	require.ErrorIs(t, err, commands.ErrInvalidExport)

	_, err = commands.CompleteJob(f.ctx, f.l, commands.Complete{JobID: id, Attempt: 1, Outcome: commands.Outcome{Kind: events.OutcomeOK}, Now: time.Now()})
	require.NoError(t, err)
	mark := f.head(t)
	r.Progress(events.Progressed{Progress: pct(0.9)})
	_, err = r.Export(f.ctx, events.Exported{Type: events.ExportText, Text: "late"})
	require.ErrorIs(t, err, commands.ErrInvalidTransition)
	r.Close(f.ctx)
	require.Equal(t, mark, f.head(t), "nothing after the terminal event")
	require.Equal(t, []string{id + ":1"}, f.job(t, id).ResultRefs())
}

// Engine.Enqueue with an idempotency key: the same key is the same job
// (Existing), another command with it a conflict; task and trace ids are
// recorded.
func TestEnqueueIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	req := engine.Enqueue{Plugin: "echo", Command: "poll", By: events.ActorAPI, IdempotencyKey: "k", TaskID: "t", TraceID: "tr"}
	first, err := f.eng.Enqueue(f.ctx, req)
	require.NoError(t, err)
	require.False(t, first.Existing)
	again, err := f.eng.Enqueue(f.ctx, req)
	require.NoError(t, err)
	require.True(t, again.Existing)
	require.Equal(t, first.JobID, again.JobID)
	j := f.job(t, first.JobID)
	require.Equal(t, "t", j.TaskID)
	require.Equal(t, "tr", j.TraceID)

	req.Command = "handle"
	_, err = f.eng.Enqueue(f.ctx, req)
	var conflict *engine.IdempotencyConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, first.JobID, conflict.JobID)
}

// A progress outside [0, 1] is dropped and the rest of the line kept; a
// message over its cap is cut to fit: the next write is not refused.
func TestRunReportCleansLines(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	id := f.running(t)
	r := f.eng.Report(id, 1)
	r.Progress(events.Progressed{Progress: pct(0.4)})
	r.Progress(events.Progressed{Progress: pct(7), Stage: "é" + strings.Repeat("x", commands.MaxProgressStage)})
	r.Progress(events.Progressed{Message: strings.Repeat("é", commands.MaxProgressMessage)})
	r.Close(f.ctx)
	_, data := f.progressed(t, id)
	require.NotEmpty(t, data)
	last := data[len(data)-1]
	require.Equal(t, 0.4, *last.Progress)
	require.LessOrEqual(t, len(last.Stage), commands.MaxProgressStage)
	require.True(t, strings.HasPrefix(last.Stage, "é"))
	require.LessOrEqual(t, len(last.Message), commands.MaxProgressMessage)
	require.True(t, utf8.ValidString(last.Message))
}
