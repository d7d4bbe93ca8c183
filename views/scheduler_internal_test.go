package views

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// An open breaker's refusal already says when it probes: system scheduler
// says it once, not again as the breaker's summary.
func TestBreakerNoteSaysTheRefusalOnce(t *testing.T) {
	t.Parallel()
	probeAt := "2026-01-01T10:00:00.005Z"
	refusal := "breaker open since 2026-01-01T09:00:00.005Z after 3 consecutive failures; half-open probe at " + probeAt
	open := ScheduleView{Breaker: "breaker open until " + probeAt + " (3 consecutive failures)", breakerProbeAt: probeAt}

	require.Equal(t, "", ScheduleView{Breaker: "breaker closed"}.BreakerNote())
	require.Equal(t, open.Breaker, open.BreakerNote())
	open.LastSkipped = &ScheduleSkip{Reason: refusal}
	require.Equal(t, "", open.BreakerNote())
	// A refusal of an earlier opening: the breaker's own summary is news.
	open.LastSkipped = &ScheduleSkip{Reason: "breaker open since …; half-open probe at 2026-01-01T09:00:00.005Z"}
	require.Equal(t, open.Breaker, open.BreakerNote())
}
