package commands_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/projections"
)

// daemonLedger opens a ledger as the daemon runs it (durable appends,
// group commit) with its projector applying every append inline, both
// closed when the benchmark ends.
func daemonLedger(b *testing.B, ctx context.Context) *ledger.Ledger {
	b.Helper()
	l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "ductile.db"), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	b.Cleanup(func() {
		p.Stop()
		l.Close()
	})
	return l
}

// BenchmarkJobLifecycle measures the ledger's share of a job, with no plugin
// process: 8 producers enqueue durably while 2 workers start and complete
// jobs (relaxed start and completion, as the dispatcher records them; the
// completion takes the job its start left in the ledger's fold cache), every projection applied
// inline, as in the daemon. It reports the process CPU per job
// (cpu-µs/job), the number to compare when changing the write path; ns/op
// is wall time per job.
func BenchmarkJobLifecycle(b *testing.B) { benchmarkLifecycle(b, events.ActorCLI) }

// BenchmarkJobLifecycleScheduled is BenchmarkJobLifecycle with every job
// made by the scheduler, all succeeding: what the circuit breaker costs a
// healthy plugin's jobs (one look at its stream per completion, no event).
func BenchmarkJobLifecycleScheduled(b *testing.B) { benchmarkLifecycle(b, events.ActorScheduler) }

// BenchmarkJobLifecycleWithPipelines is BenchmarkJobLifecycle with pipelines
// configured (an on trigger and a hook none of these jobs fire) and a 4 KB
// result routed as the dispatcher routes it: what pipelines cost the jobs
// that are not theirs.
func BenchmarkJobLifecycleWithPipelines(b *testing.B) {
	nodes := map[string]*pipeline.Node{"a": {ID: "a", Kind: pipeline.KindUses, Plugin: "pa", Command: "handle"}}
	set := &pipeline.Set{Pipelines: map[string]*pipeline.Pipeline{
		"watch": {Name: "watch", On: "file.found", Entry: "a", Nodes: nodes, Hash: "blake3:watch"},
		"audit": {Name: "audit", OnHook: pipeline.HookCompleted, Entry: "a", Nodes: nodes, Hash: "blake3:audit"},
	}}
	benchmarkLifecycleWith(b, events.ActorCLI, &commands.Pipelines{Set: set, Config: config.Default()}, bigResult)
}

// BenchmarkJobLifecycleBigResult is BenchmarkJobLifecycleWithPipelines
// without pipelines: the baseline it compares with.
func BenchmarkJobLifecycleBigResult(b *testing.B) {
	benchmarkLifecycleWith(b, events.ActorCLI, nil, bigResult)
}

var bigResult = json.RawMessage(`{"status":"ok","result":{"text":"` + strings.Repeat("lorem ipsum ", 340) + `"}}`)

func benchmarkLifecycle(b *testing.B, by events.Actor) {
	benchmarkLifecycleWith(b, by, nil, json.RawMessage(`{"status":"ok","result":"ok"}`))
}

func benchmarkLifecycleWith(b *testing.B, by events.Actor, p *commands.Pipelines, response json.RawMessage) {
	ctx := context.Background()
	l := daemonLedger(b, ctx)

	queue := make(chan string, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	fail := func(err error) { b.Error(err) }
	cpu0 := processCPU()
	b.ResetTimer()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "bench", Command: "poll", SubmittedBy: by, MaxAttempts: 3, BackoffBase: time.Second, Now: time.Now()})
				if err != nil {
					fail(err)
					return
				}
				queue <- res.JobID
			}
		}()
	}
	go func() { wg.Wait(); close(queue) }()
	var done atomic.Int64
	var workers sync.WaitGroup
	for range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for done.Add(1) <= int64(b.N) {
				id, ok := <-queue
				if !ok {
					return // a producer failed
				}
				st, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: time.Now()})
				if err != nil {
					fail(err)
					return
				}
				complete := commands.Complete{JobID: id, Attempt: st.Attempt, Now: time.Now(), Pipelines: p,
					Outcome: commands.Outcome{Kind: events.OutcomeOK, Duration: time.Millisecond, Response: response}}
				if p != nil {
					complete.Routing = &commands.Routing{Config: p.Config, Plugin: "bench"}
				}
				_, err = commands.CompleteJob(ctx, l, complete)
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	workers.Wait()
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/job")
}

func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// BenchmarkEnqueueBesideLargePayloads measures what producers of
// megabyte payloads (a webhook's largest body, 1 MiB of plain text) cost
// everyone else: two goroutines enqueue them without pause while the
// benchmark enqueues small jobs, every append durable, the projections
// inline. It reports the small enqueues' latency (p50-ms, p99-ms) and how
// many large ones got in meanwhile (large/s). Encoding a payload is its
// producer's work, not the writer's: only the SQL (its JSON checks), the
// WAL and the hash of a large event hold the other appends up. On two CPUs
// the latency depends on how the producers fall in step with the writer,
// so compare several runs (task bench runs a fixed count).
func BenchmarkEnqueueBesideLargePayloads(b *testing.B) {
	ctx := context.Background()
	l := daemonLedger(b, ctx)
	large, err := json.Marshal(map[string]string{"body": strings.Repeat("abcdefgh", 1<<17)})
	if err != nil {
		b.Fatal(err)
	}
	enqueue := func(payload json.RawMessage) error {
		_, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "bench", Command: "handle", SubmittedBy: events.ActorAPI,
			MaxAttempts: 1, Payload: payload, Now: time.Now()})
		return err
	}
	stop := make(chan struct{})
	var larges atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop) // before the wait: the producers stop even if the benchmark fails
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := enqueue(large); err != nil {
					b.Error(err)
					return
				}
				larges.Add(1)
			}
		}()
	}
	// Measure only once the large producers are in their stride.
	for larges.Load() < 2 {
		if err := enqueue(json.RawMessage(`{"n":0}`)); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	t0, larges0 := time.Now(), larges.Load()
	for range b.N {
		start := time.Now()
		if err := enqueue(json.RawMessage(`{"n":1}`)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	elapsed, got := time.Since(t0), larges.Load()-larges0
	b.StopTimer()
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6 }
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(float64(got)/elapsed.Seconds(), "large/s")
}

// BenchmarkLoadBreaker measures what a healthy scheduled job's completion
// pays for its breaker: one read of the breaker stream's newest event
// (none: the stream is empty) inside the write transaction. It reports
// ns per read, 100 reads per decision.
func BenchmarkLoadBreaker(b *testing.B) {
	ctx := context.Background()
	l := daemonLedger(b, ctx)
	for i := range 1000 { // other streams, so the index is not empty
		if _, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "p" + strings.Repeat("x", i%7), Command: "poll",
			SubmittedBy: events.ActorScheduler, MaxAttempts: 1, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += 100 {
		_, err := l.Decide(ctx, ledger.Relaxed, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
			for range min(100, b.N-done) {
				br, err := commands.LoadBreaker(tx, "bench", "poll")
				if err != nil || !br.Healthy() {
					return nil, err
				}
			}
			return nil, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
