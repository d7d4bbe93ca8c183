package events

import "strings"

// BreakerStream is the stream of the circuit breaker of one plugin's
// command (spec §5.8): every change of its state or failure count.
func BreakerStream(plugin, command string) string { return "breaker/" + plugin + "/" + command }

// BreakerFromStream returns the plugin and command of a breaker stream.
func BreakerFromStream(stream string) (plugin, command string, ok bool) {
	rest, ok := strings.CutPrefix(stream, "breaker/")
	if !ok {
		return "", "", false
	}
	// A plugin name holds no slash (config refuses one); a command may.
	plugin, command, ok = strings.Cut(rest, "/")
	return plugin, command, ok
}

// Breaker event types. Each carries the breaker as it leaves it
// (BreakerChanged), so the newest event of the stream is its state.
const (
	// BreakerFailureRecorded: a scheduled job ended dead and the breaker
	// did not open (it counts, or it was already open or half-open).
	BreakerFailureRecorded = "breaker.failure_recorded"
	// BreakerFailuresCleared: a scheduled job succeeded while the breaker
	// was closed with failures counted; the count is back to 0.
	BreakerFailuresCleared = "breaker.failures_cleared"
	// BreakerOpened: the threshold of consecutive failures was reached, or
	// the half-open probe failed. Scheduled firings are refused until ProbeAt.
	BreakerOpened = "breaker.opened"
	// BreakerHalfOpened: the cooldown is over and the scheduler let one
	// probe job through (ProbeJobID).
	BreakerHalfOpened = "breaker.half_opened"
	// BreakerClosed: a scheduled job (the probe, or one queued before the
	// breaker opened) succeeded while it was open or half-open.
	BreakerClosed = "breaker.closed"
	// BreakerReset: an operator closed it by hand (ductile system reset).
	BreakerReset = "breaker.reset"
)

// BreakerState is where a circuit breaker is.
type BreakerState string

// Breaker states.
const (
	BreakerStateClosed   BreakerState = "closed"
	BreakerStateOpen     BreakerState = "open"
	BreakerStateHalfOpen BreakerState = "half_open"
)

// BreakerReason says why a breaker event was appended.
type BreakerReason string

// Breaker reasons (the first four are the spec's transition reasons).
const (
	BreakerReasonFailureThreshold BreakerReason = "failure_threshold" // opened
	BreakerReasonSuccess          BreakerReason = "success"           // closed, failures_cleared
	BreakerReasonCooldownElapsed  BreakerReason = "cooldown_elapsed"  // half_opened
	BreakerReasonManualReset      BreakerReason = "manual_reset"      // reset
	BreakerReasonFailure          BreakerReason = "failure"           // failure_recorded
	BreakerReasonProbeFailed      BreakerReason = "probe_failed"      // opened again from half-open
	// BreakerReasonProbeEnded: half_opened again because the previous
	// probe ended without a verdict (canceled, recovered dead, never enqueued).
	BreakerReasonProbeEnded BreakerReason = "probe_ended"
)

// BreakerChanged is the data of every breaker event: the breaker as the
// event leaves it, where it came from and why.
type BreakerChanged struct {
	From   BreakerState  `json:"from"`
	State  BreakerState  `json:"state"`
	Reason BreakerReason `json:"reason"`
	// Failures is the count of consecutive failed scheduled jobs.
	Failures int `json:"failures"`
	// Threshold is the setting the decision used.
	Threshold int `json:"threshold,omitempty"`
	// JobID is the job whose end caused the event (none for a reset).
	JobID string `json:"job_id,omitempty"`
	// LastError is the last counted failure's error (kept until closed).
	LastError string `json:"last_error,omitempty"`
	// OpenedAt is when it last opened (open and half-open).
	OpenedAt string `json:"opened_at,omitempty"`
	// ProbeAt is when an open breaker lets a probe through: OpenedAt plus
	// the reset_after in force when it opened.
	ProbeAt string `json:"probe_at,omitempty"`
	// ProbeJobID is the half-open breaker's probe job.
	ProbeJobID string `json:"probe_job_id,omitempty"`
}
