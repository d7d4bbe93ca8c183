package events

import (
	"encoding/json"
	"strings"
)

// Stream names.

// JobStream is the stream of one job.
func JobStream(id string) string { return "job/" + id }

// PluginStream is the stream of one plugin's facts and state.
func PluginStream(plugin string) string { return "plugin/" + plugin }

// DedupeStream is the stream of one dedupe key for one target (plugin and
// command): reservations and releases, so a dedupe decision reads one stream.
func DedupeStream(plugin, command, key string) string {
	return "dedupe/" + plugin + "/" + command + "/" + key
}

// SystemStream is the stream of facts about the installation itself, such
// as the config a daemon applied.
const SystemStream = "system"

// JobIDFromStream returns the job id of a job stream, or "".
func JobIDFromStream(stream string) string {
	id, ok := strings.CutPrefix(stream, "job/")
	if !ok {
		return ""
	}
	return id
}

// Job event types.
const (
	JobEnqueued        = "job.enqueued"
	JobStarted         = "job.started"
	JobSucceeded       = "job.succeeded"
	JobFailed          = "job.failed"
	JobTimedOut        = "job.timed_out"
	JobRetryScheduled  = "job.retry_scheduled"
	JobDead            = "job.dead"
	JobCancelRequested = "job.cancel_requested"
	JobCanceled        = "job.canceled"
	JobRecovered       = "job.recovered"
	// JobRetried is appended to a dead or canceled job's stream when it is
	// retried as a new job (the job itself does not change).
	JobRetried       = "job.retried"
	JobStderrWritten = "job.stderr_written"
)

// Plugin event types.
const (
	PluginFactRecorded = "plugin.fact_recorded"
	PluginStateMerged  = "plugin.state_merged"
)

// System event types.
const (
	// ConfigApplied records what a daemon runs with, on start.
	ConfigApplied = "config.applied"
	// ConfigReloadRequested asks the daemon to reload its config.
	ConfigReloadRequested = "config.reload_requested"
	// ConfigReloadFailed records a reload refused: the old config stays.
	ConfigReloadFailed = "config.reload_failed"
)

// Dedupe event types.
const (
	DedupeReserved = "dedupe.reserved"
	DedupeReleased = "dedupe.released"
)

// Status is where a job is in its life (spec §3.3), as job_queue shows it.
type Status string

// Job statuses.
const (
	StatusQueued          Status = "queued"
	StatusRunning         Status = "running"
	StatusSucceeded       Status = "succeeded"
	StatusDead            Status = "dead"
	StatusCanceled        Status = "canceled"
	StatusCancelRequested Status = "cancel_requested"
)

// JobStatuses returns every job status, in the order of a job's life.
func JobStatuses() []Status {
	return []Status{StatusQueued, StatusRunning, StatusCancelRequested, StatusSucceeded, StatusDead, StatusCanceled}
}

// Terminal reports whether a job with this status is done for good.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusDead, StatusCanceled:
		return true
	}
	return false
}

// Outcome is how one run of a plugin, and so one attempt of a job, ended:
// what the runner classifies and what the attempt's event records.
type Outcome string

// Outcomes.
const (
	// OutcomeOK: exit 0 and a valid response with status "ok".
	OutcomeOK Outcome = "ok"
	// OutcomeError: status "error", a non-zero exit, a death by a signal
	// the runner did not send, or a failure to start.
	OutcomeError Outcome = "error"
	// OutcomeProtocolError: exit 0 but stdout is not one valid response
	// object (empty, not JSON, bad envelope), or stdout went over the cap.
	OutcomeProtocolError Outcome = "protocol_error"
	// OutcomeTimeout: the timeout expired and the runner stopped the plugin.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeCanceled: a cancel stopped the plugin.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeStateTooLarge: the plugin's state would exceed its size limit.
	OutcomeStateTooLarge Outcome = "state_too_large"
	// OutcomeBadState: the plugin's state_updates are not a JSON object.
	OutcomeBadState Outcome = "bad_state_updates"
	// OutcomeInterrupted: the daemon stopped the plugin to shut down. The
	// job runs again at once, and the attempt does not count.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeRefused: the ledger refused to record the attempt's outcome as
	// the plugin gave it (a depth or encoding it cannot store). Not
	// retryable.
	OutcomeRefused Outcome = "refused"
)

// AttemptStatus is how one attempt ended, as job_log shows it. An attempt
// a cancel stopped shows canceled, set by the CancelJobLog query.
type AttemptStatus string

// Attempt statuses.
const (
	AttemptRunning   AttemptStatus = "running" // started, not ended yet
	AttemptSucceeded AttemptStatus = "succeeded"
	AttemptFailed    AttemptStatus = "failed"
	AttemptTimedOut  AttemptStatus = "timed_out"
	AttemptRecovered AttemptStatus = "recovered" // the daemon died while it ran
	AttemptCanceled  AttemptStatus = "canceled"  // a cancel stopped it
)

// Enqueued is the data of job.enqueued: everything about the job that does
// not change.
type Enqueued struct {
	JobID         string          `json:"job_id"`
	Plugin        string          `json:"plugin"`
	Command       string          `json:"command"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	MaxAttempts   int             `json:"max_attempts"`
	BackoffBaseMS int64           `json:"backoff_base_ms"`
	SubmittedBy   Actor           `json:"submitted_by"`
	DedupeKey     string          `json:"dedupe_key,omitempty"`
	DedupeTTLMS   int64           `json:"dedupe_ttl_ms,omitempty"` // the per-enqueue override, if any
	ParentJobID   string          `json:"parent_job_id,omitempty"`
	SourceEventID string          `json:"source_event_id,omitempty"`
	// Event is the envelope a handle command receives: routed jobs get the
	// producing plugin's event with core-assigned event_id, source, timestamp.
	Event json.RawMessage `json:"event,omitempty"`
	// RetryOf is the dead or canceled job this one retries (job retry).
	RetryOf string `json:"retry_of,omitempty"`
	// Depth is how many routes lie between the job and its root: 0 for a
	// job a producer enqueued, the parent's depth + 1 for a routed child.
	Depth int `json:"depth,omitempty"`
	// Pipeline is where the job stands in a pipeline run; nil for a job
	// outside any pipeline.
	Pipeline *PipelineStep `json:"pipeline,omitempty"`
	// Context is the baggage the job's plugin receives as request.context:
	// the durable context accumulated along its pipeline (absent: {}).
	Context json.RawMessage `json:"context,omitempty"`
	// ReplayOf is the job this one replays (job replay): the same event and
	// context, run again as one step.
	ReplayOf string `json:"replay_of,omitempty"`
	// HookDepth is how many lifecycle hooks lie between the job and a job
	// no hook started (0).
	HookDepth int `json:"hook_depth,omitempty"`
	// TaskID, TraceID and IdempotencyKey are the Run protocol's
	// correlation ids a caller gave (POST /runs, ductile run create).
	TaskID         string `json:"task_id,omitempty"`
	TraceID        string `json:"trace_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// RootJobID is the first job of the retry chain this job is in
	// (root_run_id; empty: the job itself), and RunAttempt its place in
	// that chain (attempt; 0 means 1). RetryOf is its parent_run_id.
	RootJobID  string `json:"root_job_id,omitempty"`
	RunAttempt int    `json:"run_attempt,omitempty"`
}

// Envelope is the event a job's plugin receives as request.event: what a
// route carried from the emitting plugin, or what the core makes of a
// payload given directly (type "ductile.<producer>", the job's id as
// event_id). Every producer builds it from this one shape.
type Envelope struct {
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	EventID   string          `json:"event_id"`
	Source    string          `json:"source"`
	Timestamp string          `json:"timestamp"`
	DedupeKey string          `json:"dedupe_key,omitempty"`
}

// Started is the data of job.started.
type Started struct {
	Attempt    int    `json:"attempt"`
	DeadlineAt string `json:"deadline_at"`
	PID        int    `json:"pid,omitempty"` // of the process that runs it (the daemon, or a CLI)
	// Worker is who runs the attempt; nil in events recorded before it
	// existed.
	Worker *Worker `json:"worker,omitempty"`
	// Plugin is the process group the attempt's plugin runs in, so that
	// recovery can end it should the process running the job die first;
	// nil when no plugin process was started (an in-process step, a
	// plugin that cannot run or could not be spawned), and in events
	// recorded before it existed.
	Plugin *PluginProcess `json:"plugin,omitempty"`
	// Lease is set when a remote worker claimed the attempt: recovery at
	// start leaves the job to its lease, and the sweeper ends the attempt
	// when the lease runs out.
	Lease *Lease `json:"lease,omitempty"`
}

// Worker identifies who ran an attempt: a worker's name (a daemon's own
// workers are "<host name>/local") and the id of its process.
type Worker struct {
	Name string `json:"name"`
	PID  int    `json:"pid,omitempty"`
}

// PluginProcess identifies a plugin's process, which leads its own process
// group, beyond the reuse of its pid: by its start time and the boot of
// the machine it runs on.
type PluginProcess struct {
	PGID int `json:"pgid"` // the process group's id, which is its leader's pid
	// StartTicks is when the leader started, in clock ticks after boot
	// (field 22 of /proc/<pid>/stat).
	StartTicks uint64 `json:"start_ticks"`
	BootID     string `json:"boot_id"` // /proc/sys/kernel/random/boot_id
}

// AttemptEnded is the data of job.succeeded, job.failed and job.timed_out.
type AttemptEnded struct {
	Attempt    int             `json:"attempt"`
	Error      string          `json:"error,omitempty"`
	Kind       Outcome         `json:"kind,omitempty"` // error | protocol_error | timeout | state_too_large …
	Retryable  bool            `json:"retryable"`
	ExitCode   int             `json:"exit_code"`
	DurationMS int64           `json:"duration_ms"`
	Response   json.RawMessage `json:"response,omitempty"` // the plugin's parsed response, verbatim
	// Stdout is recorded only when it was not a valid response, and Stderr
	// always: each is an excerpt (pluginhost.Excerpt), its first and last
	// 32 KiB when it was longer than 64 KiB (events before excerpts: stdout
	// up to 10 MiB, stderr's first 64 KiB).
	Stdout string `json:"stdout,omitempty"`
	// StdoutBytes is how many bytes the plugin wrote to stdout, set when
	// the excerpt left some out.
	StdoutBytes     int64  `json:"stdout_bytes,omitempty"`
	Stderr          string `json:"stderr,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// StderrBytes is how many bytes it wrote to stderr, set when the
	// excerpt left some out (with StderrTruncated).
	StderrBytes int64 `json:"stderr_bytes,omitempty"`
	// DroppedRoutes are the routed children a success did not enqueue
	// (past service.max_route_depth), and why.
	DroppedRoutes []DroppedRoute `json:"dropped_routes,omitempty"`
	// Worker is who ran the attempt; nil in events recorded before it
	// existed.
	Worker *Worker `json:"worker,omitempty"`
	// ResultRefs are the export items of the run's final result set
	// (spec §5.2), set only on the event that ends the job (job.succeeded).
	ResultRefs []string `json:"result_refs,omitempty"`
}

// StderrWritten is the data of job.stderr_written: lines the plugin of a
// running attempt wrote to stderr, streamed while it ran. Line is the
// number of the first of them among the attempt's stderr lines (from 1).
// Truncated says the attempt streams no more: the lines after these are in
// its job.succeeded, job.failed or job.timed_out only (stderr).
type StderrWritten struct {
	Attempt   int          `json:"attempt"`
	Line      int          `json:"line"`
	Lines     []StderrLine `json:"lines"`
	Truncated bool         `json:"truncated,omitempty"`
}

// StderrLine is one line of a plugin's stderr, without its newline, and
// when the core read it (RFC 3339, nanoseconds, UTC).
type StderrLine struct {
	At   string `json:"at"`
	Text string `json:"text"`
}

// RetryScheduled is the data of job.retry_scheduled: the job is queued again
// for attempt Attempt, not before NextRetryAt.
type RetryScheduled struct {
	Attempt     int    `json:"attempt"`
	NextRetryAt string `json:"next_retry_at"`
	DelayMS     int64  `json:"delay_ms"`
	// MaxAttempts, when set, is the job's new attempt budget: an attempt
	// interrupted by a shutdown does not count against the job.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// Dead is the data of job.dead.
type Dead struct {
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
	// DroppedHooks are the on-hook pipelines its end did not start (past
	// service.max_hook_depth).
	DroppedHooks []DroppedRoute `json:"dropped_hooks,omitempty"`
	// ResultRefs are the export items of the run's final result set.
	ResultRefs []string `json:"result_refs,omitempty"`
}

// Recovered is the data of job.recovered: the attempt that was running when
// the process running it died, and the attempt the job moves to.
type Recovered struct {
	Attempt     int    `json:"attempt"`
	NextAttempt int    `json:"next_attempt"`
	Requeued    bool   `json:"requeued"`
	Reason      string `json:"reason"`
}

// Canceled is the data of job.cancel_requested and job.canceled: the
// attempt the job was on, and why.
type Canceled struct {
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason,omitempty"`
	// ResultRefs are the export items of the run's final result set, on
	// job.canceled only.
	ResultRefs []string `json:"result_refs,omitempty"`
}

// Retried is the data of job.retried: the new job that retries this one.
type Retried struct {
	RetryJobID string `json:"retry_job_id"`
}

// FactRecorded is the data of plugin.fact_recorded: a snapshot the plugin
// emitted, declared by a fact_outputs rule, which the compatibility view
// (plugin_state) mirrors.
type FactRecorded struct {
	FactType string          `json:"fact_type"`
	JobID    string          `json:"job_id"`
	Command  string          `json:"command"`
	Fact     json.RawMessage `json:"fact"`
	View     string          `json:"compatibility_view"` // mirror_object
}

// StateMerged is the data of plugin.state_merged: write-through of
// state_updates for a plugin without a fact_outputs rule. State is the whole
// state after the shallow merge, so the next merge reads one event.
type StateMerged struct {
	JobID   string          `json:"job_id"`
	Command string          `json:"command"`
	Updates json.RawMessage `json:"updates"`
	State   json.RawMessage `json:"state"`
}

// DedupeReservedData is the data of dedupe.reserved.
type DedupeReservedData struct {
	JobID string `json:"job_id"`
}

// DedupeReleasedData is the data of dedupe.released: the job reached a
// terminal state (succeeded, dead or canceled).
type DedupeReleasedData struct {
	JobID       string `json:"job_id"`
	Status      Status `json:"status"`
	CompletedAt string `json:"completed_at"`
}

// ConfigAppliedData is the data of config.applied: what a daemon loaded when it
// started, so that other processes (the CLI) check against what it really
// runs. It holds no plugin config values (they may be secrets). New facts
// about the applied config are new fields, never a new event type.
type ConfigAppliedData struct {
	Reason string `json:"reason"` // start | reload
	PID    int    `json:"pid"`    // of the daemon
	// StartedAt is when the daemon started (RFC 3339): a reload keeps it.
	StartedAt string          `json:"started_at,omitempty"`
	Plugins   []AppliedPlugin `json:"plugins"`
	Skipped   []SkippedPlugin `json:"skipped"`
	// Settings are the effective settings the daemon decides with, secrets
	// by hash only; zero in records of daemons older than them.
	Settings Settings `json:"settings"`
	// Through is the ledger's last seq when a reload began: every reload
	// request up to it is answered by this record (or config.reload_failed).
	Through int64 `json:"through,omitempty"`
	// Changes are the settings that differ from the previous record's, for
	// a reload.
	Changes []SettingChange `json:"changes,omitempty"`
	// Pipelines are the compiled pipelines it runs, by name and hash.
	Pipelines []AppliedPipeline `json:"pipelines,omitempty"`
	// SkippedPipelines are the pipelines it does not run, with the reason:
	// a uses step names a plugin that did not load.
	SkippedPipelines []SkippedPipeline `json:"skipped_pipelines,omitempty"`
	// Errors are the problems a reload asked with force applied anyway
	// (ReloadRequestedData.Force): what config check reports as errors.
	Errors []string `json:"errors,omitempty"`
	// Warnings are what the check of a reloaded config warned of (integrity
	// warnings, undeclared keys, …), for the CLI that asked to print.
	Warnings []string `json:"warnings,omitempty"`
}

// SkippedPipeline is a pipeline a daemon does not run, and why.
type SkippedPipeline struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// AppliedPipeline is one compiled pipeline a daemon runs.
type AppliedPipeline struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

// ReloadFailedData is the data of config.reload_failed: a reload the daemon
// refused, keeping the config it had.
type ReloadFailedData struct {
	PID     int    `json:"pid"`
	Through int64  `json:"through"`
	Error   string `json:"error"` // every problem, one a line
	// Errors are the problems one by one (absent in records older than
	// them: then Error).
	Errors []string `json:"errors,omitempty"`
	// Forceable says that every error is of the plugins (a skipped plugin,
	// a route or pipeline to one that is not there): a reload asked with
	// force applies such a config anyway. The files' own errors (YAML,
	// keys, values, integrity) are never forced.
	Forceable bool `json:"forceable,omitempty"`
}

// ReloadRequestedData is the data of config.reload_requested: a person or
// program asked the daemon to reload (ductile system reload, before it
// signals the daemon); the daemon answers every request up to the seq its
// reload began at with one config.applied or config.reload_failed. A plain
// SIGHUP is a request without a record, never forced.
type ReloadRequestedData struct {
	PID int `json:"pid"` // the daemon asked
	// Force asks to apply a config whose only errors are of the plugins
	// (ReloadFailedData.Forceable) anyway.
	Force bool `json:"force,omitempty"`
}

// AppliedPlugin is a plugin a daemon loaded.
type AppliedPlugin struct {
	Name     string           `json:"name"`
	Version  string           `json:"version"`
	Dir      string           `json:"dir"`
	Enabled  bool             `json:"enabled"`
	Commands []AppliedCommand `json:"commands"`
}

// AppliedCommand is one command of a loaded plugin's manifest.
type AppliedCommand struct {
	Name string `json:"name"`
	Type string `json:"type"` // read | write
}

// SkippedPlugin is a plugin directory a daemon did not load, and why.
type SkippedPlugin struct {
	Name   string `json:"name"`
	Dir    string `json:"dir"`
	Reason string `json:"reason"`
}
