package dispatch

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// An export item that finds the queue full, or comes past the cap of an
// attempt, is refused and logged, without waiting: the plugin's lines are
// never held up by the ledger.
func TestExportItemsPastTheQueueOrTheCapAreRefused(t *testing.T) {
	var logs bytes.Buffer
	c := &attemptControl{
		jobID: "job-1", attempt: 1, stopped: context.Background(),
		log:    slog.New(slog.NewTextHandler(&logs, nil)).With("job_id", "job-1"),
		report: new(engine.Engine).Report("job-1", 1), // never written: nothing is recorded here
	}
	// A recorder that records nothing yet: the queue fills.
	c.exports, c.done = make(chan events.Exported, ExportQueue), make(chan struct{})
	item := pluginhost.ControlMessage{Export: &events.Exported{Type: events.ExportText, Text: "x"}}
	for i := range ExportQueue {
		item.Line = i + 1
		c.take(item)
	}
	require.Equal(t, ExportQueue, c.queued)
	require.Zero(t, c.refused)

	item.Line = ExportQueue + 1
	c.take(item)
	require.Equal(t, 1, c.refused)
	require.Contains(t, c.last, "export items already wait to be recorded")

	c.queued = MaxExportsPerAttempt
	item.Line++
	c.take(item)
	require.Equal(t, 2, c.refused)
	require.Contains(t, c.last, "over the cap of 1000 export items per attempt")

	// Only the first LoggedRefusals are logged one by one.
	for range 2 * LoggedRefusals {
		c.take(pluginhost.ControlMessage{Refused: "control line 9 refused: not a JSON object"})
	}
	require.Equal(t, LoggedRefusals, strings.Count(logs.String(), "plugin control line refused"))
	require.Equal(t, 2+2*LoggedRefusals, c.refused)
	require.Contains(t, logs.String(), "job_id=job-1")
}
