package projections_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// BenchmarkHandoff measures one worker's commit per plugin job as the
// dispatcher records it: a job's outcome and the next job's start queued
// together (commands.HandOff, relaxed), so they share one transaction, with
// every projection applied inline, on a ledger as the daemon opens it. The
// jobs are enqueued in rounds of handoffJobs while the timer is stopped,
// as a daemon's queue holds them (their folds still cached at their start),
// so an op is one handoff: what the writer does per job at one worker,
// apart from the enqueue. It reports this process's CPU per handoff
// (cpu-µs/op) and the commits and stream reads per handoff; allocs/op
// counts the whole path (the commands' decisions included) and does not
// depend on the machine.
func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "ductile.db"), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	defer func() {
		p.Stop()
		l.Close()
	}()
	worker := events.Worker{Name: "bench", PID: 1}
	start := func(id string) commands.Start {
		return commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Worker: &worker,
			Plugin: &events.PluginProcess{PGID: 2, StartTicks: 12345, BootID: "6b1c4f0e-0c1d-4a51-9f4e-2f0e8e1f7a3b"}, Now: time.Now()}
	}
	response := json.RawMessage(`{"status":"ok","result":"ok"}`)
	queued := enqueueBenchJobs(b, l, min(b.N+1, handoffJobs))
	st, err := commands.StartJob(ctx, l, start(queued[0]))
	if err != nil {
		b.Fatal(err)
	}
	queued = queued[1:]
	var cpu time.Duration
	var writes ledger.WriteStats
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if len(queued) == 0 {
			b.StopTimer()
			cpu += processCPU()
			writes = addStats(writes, l.WriteStats())
			queued = enqueueBenchJobs(b, l, min(b.N-i, handoffJobs))
			writes = subStats(writes, l.WriteStats())
			cpu -= processCPU()
			b.StartTimer()
		}
		if i == 0 {
			cpu -= processCPU()
			writes = subStats(writes, l.WriteStats())
		}
		res := commands.HandOff(ctx, l, commands.Handoff{
			Complete: commands.Complete{JobID: st.JobID, Attempt: st.Attempt, Now: time.Now(),
				Outcome: commands.Outcome{Kind: events.OutcomeOK, Duration: time.Millisecond, Response: response}},
			Next: start(queued[0]),
		})
		if res.CompleteErr != nil || res.StartErr != nil {
			b.Fatal(res.CompleteErr, res.StartErr)
		}
		st, queued = res.Started, queued[1:]
	}
	b.StopTimer()
	cpu += processCPU()
	writes = addStats(writes, l.WriteStats())
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/n, "cpu-µs/op")
	b.ReportMetric(float64(writes.Commits)/n, "commits/op")
	b.ReportMetric(float64(writes.FoldsRead)/n, "reads/op")
}

// handoffJobs is how many jobs BenchmarkHandoff queues at a time.
const handoffJobs = 1000

// enqueueBenchJobs enqueues n jobs from 64 producers, so that the enqueues
// (not what is measured) share commits, and returns their ids.
func enqueueBenchJobs(b *testing.B, l *ledger.Ledger, n int) []string {
	ids := make([]string, n)
	var next atomic.Int64
	var producers sync.WaitGroup
	for range 64 {
		producers.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				res, err := commands.EnqueueJob(context.Background(), l, commands.Enqueue{Plugin: "bench", Command: "poll",
					SubmittedBy: events.ActorCLI, MaxAttempts: 3, BackoffBase: time.Second, Now: time.Now()})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = res.JobID
			}
		})
	}
	producers.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return ids
}

// subStats and addStats keep a running sum of the write counts of the
// timed stretches.
func subStats(sum, s ledger.WriteStats) ledger.WriteStats {
	sum.Commits -= s.Commits
	sum.FoldsRead -= s.FoldsRead
	return sum
}

func addStats(sum, s ledger.WriteStats) ledger.WriteStats {
	sum.Commits += s.Commits
	sum.FoldsRead += s.FoldsRead
	return sum
}
