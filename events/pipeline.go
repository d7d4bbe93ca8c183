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
}

// RunStream is the stream of one pipeline run: its start, its progress
// (the joins it waits on) and its end.
func RunStream(id string) string { return "run/" + id }

// Pipeline run event types, on the run's stream.
const (
	PipelineRunStarted  = "pipeline.run_started"
	PipelineRunFinished = "pipeline.run_finished"
)

// Run statuses.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
)

// RunStartedData is the data of pipeline.run_started.
type RunStartedData struct {
	RunID       string `json:"run_id"`
	Pipeline    string `json:"pipeline"`
	Hash        string `json:"hash"`
	Mode        string `json:"execution_mode"` // async | synchronous
	Trigger     string `json:"trigger"`        // api | cli | event | hook
	JobID       string `json:"job_id"`         // the run's first job
	SubmittedBy string `json:"submitted_by"`
}

// RunFinishedData is the data of pipeline.run_finished: nothing of the run
// is outstanding. Results are the jobs that ended a path of the run (no
// step followed them), in the order they ended.
type RunFinishedData struct {
	RunID   string      `json:"run_id"`
	Status  string      `json:"status"` // succeeded | failed
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
