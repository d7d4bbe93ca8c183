package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// ErrRunNotFound means no pipeline run has that id.
var ErrRunNotFound = errors.New("pipeline run not found")

// Run is one pipeline run as pipeline_runs holds it, with its results once
// it finished (from pipeline.run_finished).
type Run struct {
	RunID       string             `json:"run_id"`
	Pipeline    string             `json:"pipeline"`
	Hash        string             `json:"hash"`
	Status      string             `json:"status"` // running | succeeded | failed
	JobID       string             `json:"job_id,omitempty"`
	Trigger     string             `json:"trigger"`
	Error       string             `json:"error,omitempty"`
	StartedSeq  int64              `json:"started_seq"`
	StartedAt   string             `json:"started_at"`
	FinishedSeq int64              `json:"finished_seq,omitempty"`
	FinishedAt  string             `json:"finished_at,omitempty"`
	Results     []events.RunResult `json:"results,omitempty"`
}

// ReadRun reads one run: its row, and its results from its run_finished.
func ReadRun(ctx context.Context, l *ledger.Ledger, runID string) (Run, error) {
	var run Run
	found := false
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.GetPipelineRun(conn, runID, func(r queries.GetPipelineRunRow) error {
			found = true
			run = runFrom(queries.FindPipelineRunsRow(r))
			return nil
		})
	})
	if err != nil {
		return Run{}, fmt.Errorf("read run: %w", err)
	}
	if !found {
		return Run{}, fmt.Errorf("%w: %s", ErrRunNotFound, runID)
	}
	if run.Status == events.RunRunning {
		return run, nil
	}
	last, ok, err := lastOfType(ctx, l, events.RunStream(runID), events.PipelineRunFinished)
	if err != nil {
		return Run{}, fmt.Errorf("read run: %w", err)
	}
	if ok {
		var d events.RunFinishedData
		if err := json.Unmarshal(last.Data, &d); err != nil {
			return Run{}, fmt.Errorf("read run: %w", err)
		}
		run.Results = d.Results
	}
	return run, nil
}

func runFrom(r queries.FindPipelineRunsRow) Run {
	run := Run{RunID: r.RunID, Pipeline: r.Pipeline, Hash: r.Hash, Status: r.Status, Trigger: r.Trigger,
		StartedSeq: r.StartedSeq, StartedAt: r.StartedAt}
	if r.JobID != nil {
		run.JobID = *r.JobID
	}
	if r.Error != nil {
		run.Error = *r.Error
	}
	if r.FinishedSeq != nil {
		run.FinishedSeq = *r.FinishedSeq
	}
	if r.FinishedAt != nil {
		run.FinishedAt = *r.FinishedAt
	}
	return run
}
