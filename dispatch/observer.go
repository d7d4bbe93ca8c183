package dispatch

import (
	"time"

	"github.com/ductile/ductile/events"
)

// Observer is told how attempts end, for metrics. Its methods are called
// from the workers, concurrently, and must not block.
type Observer interface {
	// AttemptEnded: an attempt of a started job ended with outcome after d
	// (the plugin's run, as recorded).
	AttemptEnded(plugin, command string, outcome events.Outcome, d time.Duration)
	// SpawnFailed: the plugin's process could not be started.
	SpawnFailed(plugin string)
}
