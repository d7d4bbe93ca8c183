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
	Status      events.RunStatus   `json:"status"`
	JobID       string             `json:"job_id,omitempty"`
	Trigger     events.Trigger     `json:"trigger"`
	Error       string             `json:"error,omitempty"`
	StartedSeq  int64              `json:"started_seq"`
	StartedAt   string             `json:"started_at"`
	FinishedSeq int64              `json:"finished_seq,omitempty"`
	FinishedAt  string             `json:"finished_at,omitempty"`
	Results     []events.RunResult `json:"results,omitempty"`
	// Steps are what the run did at each step so far, in order: the jobs
	// it enqueued (with the event type each was entered with), the steps
	// it bypassed and dropped, with why (ReadRun only; the run's events an
	// archive moved are in the archive file).
	Steps []RunStep `json:"steps,omitempty"`
}

// RunStep is one step a run entered, bypassed or dropped.
type RunStep struct {
	Seq     int64  `json:"seq"` // the run's event that recorded it
	Node    string `json:"node"`
	Outcome string `json:"outcome"` // enqueued | skipped | dropped
	JobID   string `json:"job_id,omitempty"`
	Event   string `json:"event,omitempty"` // the type of the event it was entered with
	Reason  string `json:"reason,omitempty"`
	Error   string `json:"error,omitempty"` // a job recorded dead at once
}

// Step outcomes.
const (
	StepEnqueued = "enqueued"
	StepSkipped  = "skipped"
	StepDropped  = "dropped"
)

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
	evs, err := l.ReadStream(ctx, events.RunStream(runID))
	if err != nil {
		return Run{}, fmt.Errorf("read run: %w", err)
	}
	for _, ev := range evs {
		p, ok, err := progressOf(ev)
		if err != nil {
			return Run{}, fmt.Errorf("read run: %w", err)
		}
		if ok {
			run.Steps = append(run.Steps, stepsOf(ev.Seq, p)...)
		}
	}
	if run.Status == events.RunRunning {
		return run, nil
	}
	// Read alone: it stays readable after an archive moved the run's stream.
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

// progressOf is what the decision that appended ev to a run's stream did
// (pipeline.run_started, pipeline.step_ended); ok false for another event.
func progressOf(ev ledger.Event) (p events.RunProgress, ok bool, err error) {
	switch ev.Type {
	case events.PipelineRunStarted:
		var d events.RunStarted
		err = json.Unmarshal(ev.Data, &d)
		p = d.RunProgress
	case events.PipelineStepEnded:
		var d events.StepEndedData
		err = json.Unmarshal(ev.Data, &d)
		p = d.RunProgress
	default:
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("%s (seq %d): %w", ev.Type, ev.Seq, err)
	}
	return p, true, nil
}

// stepsOf are the steps one decision on a run entered, bypassed and
// dropped.
func stepsOf(seq int64, p events.RunProgress) []RunStep {
	var out []RunStep
	for _, s := range p.Skipped {
		out = append(out, RunStep{Seq: seq, Node: s.Node, Outcome: StepSkipped, Event: s.Event, Reason: s.Reason})
	}
	for _, d := range p.Dropped {
		out = append(out, RunStep{Seq: seq, Node: d.Node, Outcome: StepDropped, Reason: d.Reason})
	}
	for _, j := range p.Enqueued {
		out = append(out, RunStep{Seq: seq, Node: j.Node, Outcome: StepEnqueued, JobID: j.JobID, Event: j.Event, Error: j.Error})
	}
	return out
}

func runFrom(r queries.FindPipelineRunsRow) Run {
	run := Run{RunID: r.RunID, Pipeline: r.Pipeline, Hash: r.Hash, Status: events.RunStatus(r.Status), Trigger: events.Trigger(r.Trigger),
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
