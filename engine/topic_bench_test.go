package engine_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/engine"
)

// BenchmarkPublishClaimFinish is one message's way through the exchange:
// publish, claim (FIFO, one group), finish with a follow-up. Reported as
// messages/s (each message: three appends, the last with two events).
func BenchmarkPublishClaimFinish(b *testing.B) {
	t := setupTopics(b, nil)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		t.publish(b, "bench", "body", "")
		c := t.claim(b, "bench", "", "w")
		require.NotNil(b, c)
		_, err := t.eng.FinishMessage(t.ctx, c.Message.ID, fenceOf(c), engine.FollowUp{Status: "completed", Topic: "bench.done", Body: "ok"})
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "messages/s")
}

// BenchmarkClaimFinishEightWorkers drains a backlog of b.N messages with
// eight workers of one group, each claiming and finishing with a
// follow-up: the exchange's throughput under contention for the oldest
// message, as messages/s.
func BenchmarkClaimFinishEightWorkers(b *testing.B) {
	t := setupTopics(b, nil)
	for range b.N {
		t.publish(b, "bench", "body", "")
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var finished atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := t.eng.ClaimMessage(t.ctx, engine.MessageClaimRequest{Topic: "bench", Worker: fmt.Sprint("w", w)})
				if err != nil || c == nil {
					return
				}
				if _, err := t.eng.FinishMessage(t.ctx, c.Message.ID, fenceOf(c), engine.FollowUp{Status: "completed", Topic: "bench.done", Body: "ok"}); err == nil {
					finished.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(finished.Load())/time.Since(start).Seconds(), "messages/s")
	require.Equal(b, int64(b.N), finished.Load())
}
