package stream_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/ductile/ductile/stream"
)

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFiftyStreams measures the process's CPU with 50 open streams:
// while idle (cpu-ms/s, over one second with the default heartbeat), and
// per event appended (every stream wakes, reads and writes it; ns/op is
// per append, delivered to all 50). The clients run in this process too:
// the figures hold their reading and decoding.
func BenchmarkFiftyStreams(b *testing.B) {
	bundle := setup(b, stream.Options{})
	clients := make([]*client, 50)
	for i := range clients {
		clients[i], _ = bundle.open(b, "", -1)
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	idleFrom := cpuTime(b)
	time.Sleep(time.Second) // measuring idleness: nothing to wait for
	idle := cpuTime(b) - idleFrom

	b.ResetTimer()
	from := cpuTime(b)
	for range b.N {
		bundle.enqueue(b, "alpha")
		for _, c := range clients {
			c.events(b, 1)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-from).Nanoseconds())/float64(b.N), "cpu-ns/event")
	b.ReportMetric(float64(idle.Microseconds())/1000, "idle-cpu-ms/s")
}
