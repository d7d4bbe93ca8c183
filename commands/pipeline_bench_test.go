package commands_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
)

// BenchmarkPipelineStep measures the ledger's share of one step of a
// 3-step linear pipeline, with no plugin process: StartPipeline enqueues
// the first step, each step is started and completed (the completion
// records pipeline.step_ended and enqueues the next step, the last one
// records pipeline.run_finished), two chains at a time, every projection
// applied as in the daemon. It reports the process CPU per step
// (cpu-µs/step); ns/op is wall time per step. After each completion the
// next job is found by reading the run's stream.
func BenchmarkPipelineStep(b *testing.B) {
	pl := linear()
	p := &commands.Pipelines{Set: &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{pl.Name: pl}}, Config: config.Default()}
	benchmarkChains(b, func(ctx context.Context, l *ledger.Ledger) error {
		started, err := commands.StartPipeline(ctx, l, commands.StartRun{Pipeline: pl, Trigger: events.TriggerAPI,
			Payload: json.RawMessage(`{"n":1}`), SubmittedBy: "api", Config: p.Config, Now: time.Now()})
		if err != nil {
			return err
		}
		id := started.JobID
		for step := range 3 {
			if err := startComplete(ctx, l, id, p); err != nil {
				return err
			}
			evs, err := l.ReadStream(ctx, events.RunStream(started.RunID))
			if err != nil {
				return err
			}
			if step < 2 {
				var d events.StepEndedData
				if err := json.Unmarshal(evs[len(evs)-1].Data, &d); err != nil {
					return err
				}
				if len(d.Enqueued) != 1 {
					b.Fatalf("step %d enqueued %d jobs", step, len(d.Enqueued))
				}
				id = d.Enqueued[0].JobID
			} else if evs[len(evs)-1].Type != events.PipelineRunFinished {
				b.Fatalf("the run did not finish: %s", evs[len(evs)-1].Type)
			}
		}
		return nil
	})
}

// BenchmarkIndependentJobs is BenchmarkPipelineStep's baseline: three
// jobs enqueued, started and completed one after the other with no
// pipeline (each job's stream read after its completion, as the pipeline
// benchmark reads the run's).
func BenchmarkIndependentJobs(b *testing.B) {
	benchmarkChains(b, func(ctx context.Context, l *ledger.Ledger) error {
		for range 3 {
			res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "bench", Command: "handle", SubmittedBy: events.ActorCLI,
				MaxAttempts: 3, BackoffBase: time.Second, Payload: json.RawMessage(`{"n":1}`), Now: time.Now()})
			if err != nil {
				return err
			}
			if err := startComplete(ctx, l, res.JobID, nil); err != nil {
				return err
			}
			if _, err := l.ReadStream(ctx, events.JobStream(res.JobID)); err != nil {
				return err
			}
		}
		return nil
	})
}

func startComplete(ctx context.Context, l *ledger.Ledger, id string, p *commands.Pipelines) error {
	st, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: time.Now()})
	if err != nil {
		return err
	}
	_, err = commands.CompleteJob(ctx, l, commands.Complete{JobID: id, Attempt: st.Attempt, Now: time.Now(), Pipelines: p,
		Outcome: commands.Outcome{Kind: events.OutcomeOK, Duration: time.Millisecond, Response: json.RawMessage(`{"status":"ok","result":"ok"}`)}})
	return err
}

// benchmarkChains runs chain (3 steps) from two goroutines until b.N
// steps have run, and reports the process CPU per step.
func benchmarkChains(b *testing.B, chain func(context.Context, *ledger.Ledger) error) {
	ctx := context.Background()
	l := daemonLedger(b, ctx)
	chains := (b.N + 2) / 3
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := processCPU()
	b.ResetTimer()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(chains) {
				if err := chain(ctx, l); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(3*chains), "cpu-µs/step")
}
