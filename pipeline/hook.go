package pipeline

// HookSignal is what an on-hook pipeline follows: how a job of a plugin
// with notify_on_complete ended.
type HookSignal string

// The hook signals, one per way a job ends that fires hooks (a cancel
// fires none).
const (
	HookCompleted HookSignal = "job.completed" // it succeeded
	HookFailed    HookSignal = "job.failed"    // it died
	HookTimedOut  HookSignal = "job.timed_out" // it died after its last attempt timed out
)

// HookSignals are the signals an on-hook pipeline may name.
var HookSignals = []HookSignal{HookCompleted, HookFailed, HookTimedOut}

// hookSignalNames are HookSignals as strings, for messages and suggestions.
func hookSignalNames() []string {
	names := make([]string, len(HookSignals))
	for i, s := range HookSignals {
		names[i] = string(s)
	}
	return names
}
