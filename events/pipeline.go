package events

import "encoding/json"

// PipelineStep says where a job stands in a pipeline run: which run, which
// compiled pipeline (by name and hash: a tree finishes on the version it
// started with), which node of it, and the split instances it is inside
// (innermost last), which a join waits on.
type PipelineStep struct {
	Run      string   `json:"run"`
	Pipeline string   `json:"pipeline"`
	Hash     string   `json:"hash"`
	Node     string   `json:"node"`
	Splits   []string `json:"splits,omitempty"`
	// Branches is the job's branch in each of Splits (same order).
	Branches []int `json:"branches,omitempty"`
}

// RunStream is the stream of one pipeline run: its start, its progress
// (the joins it waits on) and its end.
func RunStream(id string) string { return "run/" + id }

// Pipeline run event types, on the run's stream.
const (
	PipelineRunStarted  = "pipeline.run_started"
	PipelineRunFinished = "pipeline.run_finished"
)

// RunStatus is where a pipeline run is: running until nothing of it is
// outstanding, then succeeded or failed (pipeline.run_finished).
type RunStatus string

// Run statuses.
const (
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
)

// RunStatuses returns every run status, in the order of a run's life.
func RunStatuses() []RunStatus { return []RunStatus{RunRunning, RunSucceeded, RunFailed} }

// Trigger is what started a pipeline run, as pipeline.run_started records it.
type Trigger string

// Triggers.
const (
	TriggerAPI   Trigger = "api"   // POST /pipeline/{name}
	TriggerCLI   Trigger = "cli"   // ductile pipeline run
	TriggerEvent Trigger = "event" // a job's event the pipeline is on
	TriggerHook  Trigger = "hook"  // a job's end the pipeline is on-hook for
)

// RunStartedData is the data of pipeline.run_started.
type RunStartedData struct {
	RunID       string  `json:"run_id"`
	Pipeline    string  `json:"pipeline"`
	Hash        string  `json:"hash"`
	Mode        string  `json:"execution_mode"` // async | synchronous
	Trigger     Trigger `json:"trigger"`
	JobID       string  `json:"job_id"` // the run's first job
	SubmittedBy Actor   `json:"submitted_by"`
}

// RunFinishedData is the data of pipeline.run_finished: nothing of the run
// is outstanding. Results are the jobs that ended a path of the run (no
// step followed them), in the order they ended.
type RunFinishedData struct {
	RunID   string      `json:"run_id"`
	Status  RunStatus   `json:"status"` // succeeded | failed
	Error   string      `json:"error,omitempty"`
	Results []RunResult `json:"results"`
}

// RunResult is one job that ended a path of a run.
type RunResult struct {
	JobID   string          `json:"job_id"`
	Node    string          `json:"node"`
	Plugin  string          `json:"plugin"`
	Command string          `json:"command"`
	Status  Status          `json:"status"`
	Result  json.RawMessage `json:"result,omitempty"` // the response's result
	Error   string          `json:"error,omitempty"`
}

// Further pipeline event types: a step's end on the run's stream, and a
// compiled pipeline version on its own stream (PipelineVersionStream).
const (
	PipelineStepEnded = "pipeline.step_ended"
	PipelineCompiled  = "pipeline.compiled"
)

// PipelineVersionStream is the stream of one compiled version of a
// pipeline: its one event, pipeline.compiled. One stream per version keeps
// every version readable after an archive (which carries the newest event
// of each stream), so a run finishes on its version however old it is.
func PipelineVersionStream(name, hash string) string { return "pipeline/" + name + "/" + hash }

// StatusSkipped is a branch entry that ran no job: every step of the
// branch was bypassed by its if.
const StatusSkipped Status = "skipped"

// CompiledData is the data of pipeline.compiled: one compiled version of a
// pipeline, recorded once per hash, so that a run started on it finishes
// on it after a reload or a restart.
type CompiledData struct {
	Name     string          `json:"name"`
	Hash     string          `json:"hash"`
	Pipeline json.RawMessage `json:"pipeline"` // the compiled form (pipeline.Pipeline as JSON)
}

// RunProgress is what one decision did to a run: the jobs it enqueued, the
// steps it bypassed or dropped, the split instances it opened and closed,
// and the run's bookkeeping after it (State).
type RunProgress struct {
	Enqueued []RunJob      `json:"enqueued,omitempty"`
	Skipped  []SkippedStep `json:"skipped,omitempty"`
	Dropped  []DroppedStep `json:"dropped,omitempty"`
	Opened   []string      `json:"opened,omitempty"` // split instance ids
	Closed   []ClosedSplit `json:"closed,omitempty"`
	State    RunState      `json:"state"`
}

// RunJob is a job a run enqueued at a node.
type RunJob struct {
	JobID string `json:"job_id"`
	Node  string `json:"node"`
	// Event is the type of the event the step was entered with (what its
	// on: matched; absent in events recorded before it was added).
	Event string `json:"event,omitempty"`
	// Error, when set, is why the job was recorded dead at once (a baggage
	// claim that would change inherited context).
	Error string `json:"error,omitempty"`
}

// SkippedStep is a step bypassed: its on: does not list the type of the
// event it was entered with, or its if was false.
type SkippedStep struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
	// Event is the type of the event the step was entered with (absent
	// in events recorded before it was added).
	Event string `json:"event,omitempty"`
}

// DroppedStep is a step not entered: past the pipeline's max_depth, or
// its if could not be evaluated. It fails its path.
type DroppedStep struct {
	Node   string `json:"node"`
	Depth  int    `json:"depth,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Reason string `json:"reason"`
}

// ClosedSplit is a split instance with nothing outstanding: joined (its
// join step entered), ended (it had no join step) or failed (a branch
// failed and continue_on_error is off: the join is not run).
type ClosedSplit struct {
	Split  string `json:"split"`
	Node   string `json:"node"`
	Status string `json:"status"` // joined | ended | failed
	Error  string `json:"error,omitempty"`
}

// Split instance ends.
const (
	SplitJoined = "joined"
	SplitEnded  = "ended"
	SplitFailed = "failed"
)

// RunState is a run's bookkeeping as its stream's newest event leaves it:
// the jobs not yet terminal, the open split instances and the paths ended
// so far. Each decision on the run reads it from that one event. It holds
// no results, events or contexts (those are on the jobs' own streams, read
// when a split closes or the run finishes), so that it stays small.
type RunState struct {
	Outstanding int         `json:"outstanding"`
	Splits      []OpenSplit `json:"splits,omitempty"`  // open split instances, outer before inner
	Results     []PathEnd   `json:"results,omitempty"` // the paths of the run ended so far
	Failed      bool        `json:"failed,omitempty"`
	Error       string      `json:"error,omitempty"`
	// BaseDepth is the depth of the run's first jobs in their job tree
	// (an on trigger's run starts below the emitting job): max_depth
	// counts from it.
	BaseDepth int `json:"base_depth,omitempty"`
}

// PathEnd is a path of a run that ended: the job that ended it (none for a
// step that could not be entered), its node and how it ended.
type PathEnd struct {
	JobID  string `json:"job_id,omitempty"`
	Node   string `json:"node"`
	Status Status `json:"status"`
	Error  string `json:"error,omitempty"`
}

// OpenSplit is an open split instance: where it stands, the context its
// branches started with, its jobs not yet terminal (in any branch, nested
// splits included) and the entries of its branches that ended.
type OpenSplit struct {
	ID          string          `json:"id"`
	Node        string          `json:"node"`
	Outer       []string        `json:"outer,omitempty"`        // the splits enclosing it
	OuterBranch []int           `json:"outer_branch,omitempty"` // its branch in each of them
	Context     json.RawMessage `json:"context,omitempty"`
	Outstanding int             `json:"outstanding"`
	Branches    []BranchEnd     `json:"branches,omitempty"`
}

// BranchEnd is one job that ended a branch of a split instance (or a
// branch that ran no job, or failed without one). Its result, events and
// context are its job's (job.enqueued, job.succeeded), read at the join.
type BranchEnd struct {
	Branch int    `json:"branch"`
	Node   string `json:"node"`
	JobID  string `json:"job_id,omitempty"`
	Status Status `json:"status"`
	Error  string `json:"error,omitempty"`
}

// StepEndedData is the data of pipeline.step_ended: a job of the run
// reached a terminal state, and what that did to the run.
type StepEndedData struct {
	RunID  string `json:"run_id"`
	JobID  string `json:"job_id"`
	Node   string `json:"node"`
	Status Status `json:"status"`
	RunProgress
}

// RunStarted is the data of pipeline.run_started as recorded: the run, and
// what entering its first step did (the jobs enqueued, the steps bypassed).
type RunStarted struct {
	RunStartedData
	RunProgress
}
