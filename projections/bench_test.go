package projections_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// BenchmarkReplay rebuilds every projection from a log of about 100,000
// events of real job lifecycles (see lifecycles), as ledger replay does,
// and reports events/s and this process's CPU per event (cpu-µs/event,
// steadier than the wall clock on a shared machine).
func BenchmarkReplay(b *testing.B) {
	l := openLedger(b, "bench.db")
	lifecycles(b, l, rand.New(rand.NewPCG(7, 7)), 100_000)
	head, err := l.LastSeq(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		if _, err := projections.Rebuild(context.Background(), l, 0); err != nil {
			b.Fatal(err)
		}
	}
	events := float64(head * int64(b.N))
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/events, "cpu-µs/event")
}

// BenchmarkReadLog reads every event of BenchmarkReplay's log and does
// nothing with them: what a replay costs before any projection work, the
// floor under BenchmarkReplay's rate on this machine.
func BenchmarkReadLog(b *testing.B) {
	l := openLedger(b, "bench.db")
	lifecycles(b, l, rand.New(rand.NewPCG(7, 7)), 100_000)
	head, err := l.LastSeq(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		var n int64
		err := l.Read(context.Background(), func(conn *sqlite.Conn) error {
			return ledger.ReadRange(conn, 0, head, func(ledger.Event) error { n++; return nil })
		})
		if err != nil || n != head {
			b.Fatal(n, err)
		}
	}
	events := float64(head * int64(b.N))
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/1e3/events, "cpu-µs/event")
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// lifecycles appends at least n events of job lifecycles as a daemon
// records them, through the real commands: every job is enqueued (some
// with a dedupe key), started and completed. Most succeed with a response,
// stderr, and either a fact (mirror_object) or a state merge; one in ten
// routes one or two children, which run later; one in ten fails once and
// succeeds on its retry; one in fifty fails for good. A few jobs are in
// flight at once, so their events interleave.
func lifecycles(b *testing.B, l *ledger.Ledger, rng *rand.Rand, n int64) {
	b.Helper()
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plugins := []string{"echo", "fetch", "notify"}
	enqueue := func() commands.Enqueue {
		e := commands.Enqueue{Plugin: plugins[rng.IntN(len(plugins))], Command: "poll", SubmittedBy: events.ActorScheduler,
			MaxAttempts: 3, BackoffBase: time.Second, DefaultDedupeTTL: time.Hour, Now: now}
		if rng.IntN(4) == 0 {
			e.Command = "handle"
			e.Payload = json.RawMessage(fmt.Sprintf(`{"url":"https://example.com/item/%d","tags":["a","b"],"n":%d}`, rng.IntN(1e6), rng.IntN(100)))
		}
		if rng.IntN(10) == 0 {
			e.DedupeKey = fmt.Sprintf("key-%d", rng.IntN(1e6))
		}
		return e
	}
	var queued, running []string
	for {
		last, err := l.LastSeq(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if last >= n {
			return
		}
		now = now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		switch {
		case len(queued) < 4:
			res, err := commands.EnqueueJob(ctx, l, enqueue())
			if err != nil {
				b.Fatal(err)
			}
			if !res.Deduped {
				queued = append(queued, res.JobID)
			}
		case len(running) < 2:
			id := queued[0]
			queued = queued[1:]
			if _, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, PID: 4242, Now: now.Add(time.Minute)}); err != nil {
				b.Fatal(err)
			}
			running = append(running, id)
		default:
			id := running[0]
			running = running[1:]
			evs, err := l.ReadStream(ctx, "job/"+id)
			if err != nil {
				b.Fatal(err)
			}
			j, err := commands.FoldJob(evs)
			if err != nil {
				b.Fatal(err)
			}
			runs := rng.IntN(1000)
			out := commands.Outcome{Kind: events.OutcomeOK, ExitCode: 0, Duration: time.Duration(5+rng.IntN(200)) * time.Millisecond,
				Stderr: fmt.Sprintf("fetching page %d\ndone in %d ms\n", runs, rng.IntN(300)),
				Response: json.RawMessage(fmt.Sprintf(`{"status":"ok","result":"%s %s","events":[{"type":"%s.%s","payload":{}}],`+
					`"state_updates":{"last_command":"%s","runs":%d},"logs":[{"level":"info","message":"%s run %d"}]}`,
					j.Plugin, j.Command, j.Plugin, j.Command, j.Command, runs, j.Plugin, runs)),
				StateUpdates: json.RawMessage(fmt.Sprintf(`{"last_command":"%s","runs":%d}`, j.Command, runs))}
			var facts []commands.FactRule
			if j.Plugin == "echo" {
				facts = []commands.FactRule{{FactType: "echo.snapshot", View: "mirror_object"}}
			}
			var children []commands.Enqueue
			switch r := rng.IntN(50); {
			case r == 0:
				out = commands.Outcome{Kind: events.OutcomeError, Error: "HTTP 404: no such item", ExitCode: 1, Stderr: "HTTP 404\n",
					Duration: 20 * time.Millisecond}
			case r < 6 && j.Attempt == 1:
				out = commands.Outcome{Kind: events.OutcomeError, Retryable: true, Error: "HTTP 503: try again", ExitCode: 1,
					Stderr: "HTTP 503\n", Duration: 20 * time.Millisecond}
			case r < 11:
				for range 1 + rng.IntN(2) {
					children = append(children, enqueue())
				}
			}
			res, err := commands.CompleteJob(ctx, l, commands.Complete{JobID: id, Attempt: j.Attempt, Outcome: out, Facts: facts,
				Children: children, Jitter: func(time.Duration) time.Duration { return 0 }, Now: now})
			if err != nil {
				b.Fatal(err)
			}
			if res.Status == "queued" {
				queued = append(queued, id)
			}
			for _, c := range res.Children {
				if !c.Deduped {
					queued = append(queued, c.JobID)
				}
			}
		}
	}
}
