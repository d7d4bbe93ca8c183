package dispatch_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// progressFloodScript writes 1,000 progress lines on its control channel as
// fast as it can, exports one item, and answers.
const progressFloodScript = `#!/bin/sh
cat >/dev/null
awk 'BEGIN { for (i = 1; i <= 1000; i++) printf "{\"progress\":%.3f,\"message\":\"line %d\"}\n", i / 1000, i }' >&3
printf '%s\n' '{"export":{"type":"text","text":"done"}}' >&3
printf '%s\n' '{"status":"ok"}'
`

// BenchmarkProgressFloodRuns runs jobs whose plugin writes 1,000 progress
// lines and one export item each, 16 at a time, and reports the daemon's
// CPU per run (this process's, not the plugins') and the progress events
// stored per run; beside jobs whose plugin writes nothing on its control
// channel (quick), for the difference.
func BenchmarkProgressFloodRuns(b *testing.B) {
	b.Run("quick", func(b *testing.B) { benchmarkRuns(b, "quick", 0) })
	b.Run("progressflood", func(b *testing.B) { benchmarkRuns(b, "progressflood", 1) })
}

func benchmarkRuns(b *testing.B, plugin string, items int) {
	ctx := context.Background()
	cfg := testConfig(16, nil)
	d, err := daemon.Open(ctx, daemon.Options{StateDir: b.TempDir(), Config: cfg, Grace: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ledger: ledger.Options{Synchronous: "NORMAL"}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	var usage0 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &usage0)
	ids := make([]string, 0, b.N)
	b.ResetTimer()
	for range b.N {
		res, err := commands.EnqueueJob(ctx, d.Ledger, commands.JobFor(d.Config(), plugin, "poll", events.ActorCLI))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	progressed, exported := 0, 0
	for _, id := range ids {
		_, err := d.Ledger.Follow(ctx, 0, ledger.Filter{Stream: events.JobStream(id)}, func(ev ledger.Event) error {
			switch ev.Type {
			case events.JobProgressed:
				progressed++
			case events.JobExported:
				exported++
			case events.JobSucceeded:
				var ended events.AttemptEnded
				_ = json.Unmarshal(ev.Data, &ended)
				if len(ended.ResultRefs) != items {
					b.Errorf("job %s: result_refs %v", id, ended.ResultRefs)
				}
				return ledger.ErrStopFollowing
			case events.JobFailed, events.JobDead:
				b.Errorf("job %s: %s %s", id, ev.Type, ev.Data)
				return ledger.ErrStopFollowing
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var usage unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &usage)
	cpu := time.Duration(usage.Utime.Nano()+usage.Stime.Nano()) - time.Duration(usage0.Utime.Nano()+usage0.Stime.Nano())
	if exported != items*b.N {
		b.Errorf("%d export items for %d runs", exported, b.N)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/run")
	b.ReportMetric(float64(progressed)/float64(b.N), "progressed/run")
}
