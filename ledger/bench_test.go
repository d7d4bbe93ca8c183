package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ductile/ductile/ledger"
)

// BenchmarkAppend measures single-event durable appends (each returns once
// fsynced) from 1, 8 and 64 concurrent goroutines, with group commit (the
// default: batched commits, flushed by the syncer) and with every append
// committing and flushing alone (MaxBatch=1), which is the baseline group
// commit must beat by 10× at 64 writers. Each append opens a new stream
// named in time order, as Ductile's own streams are (job/<UUIDv7>), so that
// concurrent appends land side by side in the (stream, version) index rather
// than in 64 scattered places.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []struct {
		name     string
		maxBatch int
	}{{"group", 0}, {"alone", 1}} {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode.name, writers), func(b *testing.B) {
				l, err := ledger.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), ledger.Options{MaxBatch: mode.maxBatch})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							_, err := l.Append(context.Background(), ledger.NewEvent{
								Stream: fmt.Sprintf("bench/%012d", i), Type: "bench.appended", Data: map[string]int64{"i": i, "writer": int64(w)},
							})
							if err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			})
		}
	}
}
