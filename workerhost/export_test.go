package workerhost

import (
	"testing"
	"time"
)

// SetLastReportFor sets lastReportFor for t's duration.
func SetLastReportFor(t *testing.T, d time.Duration) {
	old := lastReportFor
	lastReportFor = d
	t.Cleanup(func() { lastReportFor = old })
}
