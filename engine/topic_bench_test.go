package engine_test

import (
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
