package events

// LogPruned records that job logs older than a cutoff were pruned
// (service.job_log_retention, or ductile ledger prune), on the system stream.
const LogPruned = "log.pruned"

// LogPrunedData is the data of log.pruned. The job_log projection deletes
// the rows of every job that was terminal (succeeded, dead or canceled) as
// of this event and completed before Before: the cutoff is in the event,
// so a replay deletes exactly the rows the live projection deleted.
type LogPrunedData struct {
	// Before is the cutoff instant (ledger.TimeFormat: fixed-width UTC).
	Before string `json:"before"`
	// Retention is the retention that made the cutoff, if one did.
	Retention string `json:"retention,omitempty"`
	// Jobs is how many jobs' logs the pruner expected to delete; the
	// projection decides from the event alone, not from this count.
	Jobs int64 `json:"jobs"`
	// By is who pruned: ActorDaemon or ActorCLI.
	By Actor `json:"by"`
}
