package projections_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/ductile/ductile/projections"
)

// BenchmarkReplay rebuilds every projection from a 100,000-event log.
func BenchmarkReplay(b *testing.B) {
	const events = 100_000
	l := openLedger(b, "bench.db")
	generate(b, l, rand.New(rand.NewPCG(7, 7)), events, nil)
	head, err := l.LastSeq(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := projections.Rebuild(context.Background(), l, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(head*int64(b.N))/b.Elapsed().Seconds(), "events/s")
}
