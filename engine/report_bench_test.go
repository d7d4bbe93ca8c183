package engine_test

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ductile/ductile/events"
)

// BenchmarkRunReportLoad: 200 running attempts each report 1,000 progress
// lines as fast as they can, at once, then close. It reports the
// job.progressed events stored per run (at most one a second plus the
// last) and this process's CPU per run (cpu-ms/run) for the reporting
// alone: the ledger's writes included, the plugins' not.
func BenchmarkRunReportLoad(b *testing.B) {
	const runs, lines = 200, 1000
	f := setup(b, nil)
	var cpu time.Duration
	stored := 0
	for range b.N {
		b.StopTimer()
		ids := make([]string, runs)
		for i := range ids {
			ids[i] = f.running(b)
		}
		b.StartTimer()
		cpu0 := processCPU()
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := f.eng.Report(id, 1)
				for i := 1; i <= lines; i++ {
					p := float64(i) / lines
					r.Progress(events.Progressed{Progress: &p, Stage: "work"})
				}
				r.Close(f.ctx)
			}()
		}
		wg.Wait()
		cpu += processCPU() - cpu0
		b.StopTimer()
		for _, id := range ids {
			evs, err := f.l.ReadStream(f.ctx, events.JobStream(id))
			if err != nil {
				b.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Type == events.JobProgressed {
					stored++
				}
			}
		}
		b.StartTimer()
	}
	n := float64(b.N * runs)
	b.ReportMetric(float64(stored)/n, "progress-events/run")
	b.ReportMetric(float64(cpu.Microseconds())/1e3/n, "cpu-ms/run")
}

func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
