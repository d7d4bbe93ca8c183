package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
)

// StartRun asks for a run of a pipeline.
type StartRun struct {
	Pipeline *pipeline.Pipeline
	Trigger  events.Trigger
	// Payload is what the first step receives as its event's payload
	// (event type "ductile.pipeline").
	Payload     json.RawMessage
	SubmittedBy events.Actor
	Config      *config.Config
	Now         time.Time
	// EventType is the first step's input event type (default
	// ductile.pipeline): the on event's type, or the hook's signal.
	EventType string
	// ParentJobID, Depth, Correlation and HookDepth place the run's first
	// jobs: an on trigger's run is a child of the emitting job, one deeper,
	// in its tree; the zero values make a fresh root.
	ParentJobID string
	Depth       int
	Correlation string
	HookDepth   int
	// Node, when set, is the step the run enters first instead of the
	// pipeline's entry, with Context as its inherited baggage: a sandbox
	// run of one step (pipeline dry-run --step).
	Node    string
	Context json.RawMessage
}

// RunStartedResult is a started run: its id and its first job.
type RunStartedResult struct {
	RunID string `json:"run_id"`
	JobID string `json:"job_id"`
	Seq   int64  `json:"seq"`
}

// StartPipeline records pipeline.run_started and enqueues the run's first
// step(s), in one durable decision: entering its entry node (a uses node
// makes a job, a split opens an instance and enters each branch, an if
// that is false bypasses the node). The pipeline's compiled form is
// recorded on pipeline/<name> the first time its hash runs. A run whose
// every step is bypassed finishes in the same decision.
func StartPipeline(ctx context.Context, l *ledger.Ledger, cmd StartRun) (RunStartedResult, error) {
	if err := cmd.validate(); err != nil {
		return RunStartedResult{}, fmt.Errorf("start pipeline: %w", err)
	}
	var res RunStartedResult
	seqs, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		p := &Pipelines{Config: cmd.Config}
		evs, r, err := p.startRun(tx, cmd, map[string]bool{})
		res = r
		return evs, err
	})
	if err != nil {
		return RunStartedResult{}, fmt.Errorf("start pipeline: %w", err)
	}
	if len(seqs) > 0 {
		res.Seq = seqs[0]
	}
	return res, nil
}

func (cmd *StartRun) validate() error {
	switch {
	case cmd.Pipeline == nil:
		return fmt.Errorf("%w: no pipeline given", ErrInvalidCommand)
	case cmd.Pipeline.Entry == "" || cmd.Pipeline.Nodes[cmd.Pipeline.Entry] == nil:
		return fmt.Errorf("%w: pipeline %s has no entry step", ErrInvalidCommand, cmd.Pipeline.Name)
	case cmd.Trigger == "":
		return fmt.Errorf("%w: trigger is required", ErrInvalidCommand)
	case cmd.Node != "" && cmd.Pipeline.Nodes[cmd.Node] == nil:
		return fmt.Errorf("%w: pipeline %s has no step %q", ErrInvalidCommand, cmd.Pipeline.Name, cmd.Node)
	}
	if err := checkContext(cmd.Context); err != nil {
		return err
	}
	if len(cmd.Payload) == 0 {
		cmd.Payload = json.RawMessage("{}")
	}
	if !json.Valid(cmd.Payload) {
		return fmt.Errorf("%w: payload is not valid JSON", ErrInvalidCommand)
	}
	if cmd.SubmittedBy == "" {
		cmd.SubmittedBy = events.Actor(cmd.Trigger)
	}
	if cmd.Now.IsZero() {
		cmd.Now = time.Now()
	}
	return nil
}

// startRun starts a run of cmd.Pipeline inside a decision: the events of
// its start (pipeline.compiled once per hash, run_started, the first jobs,
// run_finished if nothing is outstanding).
func (p *Pipelines) startRun(tx *ledger.Tx, cmd StartRun, seen map[string]bool) ([]ledger.NewEvent, RunStartedResult, error) {
	if err := cmd.validate(); err != nil {
		return nil, RunStartedResult{}, err
	}
	pl := cmd.Pipeline
	u, err := uuid.NewV7()
	if err != nil {
		return nil, RunStartedResult{}, err
	}
	runID := u.String()
	evs, err := compiledEvent(tx, pl, seen)
	if err != nil {
		return nil, RunStartedResult{}, err
	}
	state := events.RunState{BaseDepth: cmd.Depth}
	cfg := cmd.Config
	if cfg == nil {
		cfg = p.config()
	}
	h := &stepHost{p: p, tx: tx, pl: pl, cfg: cfg, runID: runID, now: cmd.Now,
		correlation: cmd.Correlation, hookDepth: cmd.HookDepth, seen: seen, by: cmd.SubmittedBy}
	at := pipeline.Position{Depth: cmd.Depth, Parent: cmd.ParentJobID}
	s := &pipeline.Stepper{Pipeline: pl, Host: h, State: &state, Here: at}
	typ := cmd.EventType
	if typ == "" {
		typ = EventPipeline
	}
	first := pl.Entry
	if cmd.Node != "" {
		first = cmd.Node
	}
	if _, err := s.Enter(first, pipeline.Input{Type: typ, Payload: cmd.Payload}, storedContext(cmd.Context), at, nil); err != nil {
		return nil, RunStartedResult{}, err
	}
	if err := s.CloseReady(); err != nil {
		return nil, RunStartedResult{}, err
	}
	mode := pl.ExecutionMode
	if mode == "" {
		mode = pipeline.ModeAsync
	}
	s.Progress.State = state
	correlation := h.correlation
	if correlation == "" {
		correlation = runID
	}
	meta := ledger.Meta{CorrelationID: correlation, Actor: cmd.SubmittedBy}
	evs = append(evs, ledger.NewEvent{Stream: events.RunStream(runID), ExpectedVersion: 0, Type: events.PipelineRunStarted, Meta: meta,
		Data: events.RunStarted{RunStartedData: events.RunStartedData{RunID: runID, Pipeline: pl.Name, Hash: pl.Hash, Mode: mode,
			Trigger: cmd.Trigger, JobID: h.firstJob, SubmittedBy: cmd.SubmittedBy}, RunProgress: s.Progress}})
	evs = append(evs, h.evs...)
	fin, err := finished(s, runID, 1, meta)
	if err != nil {
		return nil, RunStartedResult{}, err
	}
	evs = append(evs, fin...)
	return evs, RunStartedResult{RunID: runID, JobID: h.firstJob}, nil
}

// compiledEvent records pl on its version's stream (pipeline.compiled),
// once per version.
func compiledEvent(tx *ledger.Tx, pl *pipeline.Pipeline, seen map[string]bool) ([]ledger.NewEvent, error) {
	if seen[pl.Hash] {
		return nil, nil
	}
	seen[pl.Hash] = true
	stream := events.PipelineVersionStream(pl.Name, pl.Hash)
	if _, ok, err := tx.LastEvent(stream); err != nil || ok {
		return nil, err
	}
	body, err := json.Marshal(pl)
	if err != nil {
		return nil, err
	}
	return []ledger.NewEvent{{Stream: stream, ExpectedVersion: 0, Type: events.PipelineCompiled,
		Data: events.CompiledData{Name: pl.Name, Hash: pl.Hash, Pipeline: body}, Meta: ledger.Meta{Actor: events.ActorPipeline}}}, nil
}
