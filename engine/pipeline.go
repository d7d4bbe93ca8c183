package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
)

// StartPipeline asks for a run of a pipeline.
type StartPipeline struct {
	// Name is a pipeline of the Engine's (a *PipelineNotFoundError if
	// not), unless Pipeline is given: one the caller compiled (the CLI, from
	// its config file).
	Name     string
	Pipeline *pipeline.Pipeline
	// Payload is the first step's event payload, checked by CheckPayload
	// (PayloadObject); none is {}.
	Payload json.RawMessage
	Trigger events.Trigger // events.TriggerAPI, TriggerCLI
	By      events.Actor   // who asked: the first jobs' submitted_by
	// Allow, when set, is asked once the pipeline is known and before the
	// payload is checked and the run started (the API's Idempotency-Key
	// refusal and its place among the synchronous callers); its error is
	// returned as is.
	Allow func(*pipeline.Pipeline) error
	Now   time.Time
}

// RunStarted is a started run: its id and first job, and the pipeline.
type RunStarted struct {
	commands.RunStartedResult
	Pipeline *pipeline.Pipeline
}

// PipelineNotFoundError says there is no pipeline of that name: Known are
// the pipelines there are, Nearest the one nearest to Name if near enough
// to be a typo.
type PipelineNotFoundError struct {
	Name    string
	Known   []string
	Nearest string
}

func (e *PipelineNotFoundError) Error() string { return fmt.Sprintf("no pipeline %q", e.Name) }

// StartPipeline starts a run of a pipeline in one durable decision
// (commands.StartPipeline): its first steps' jobs are built with the
// Engine's config and moved on by its pipeline runtime.
func (e *Engine) StartPipeline(ctx context.Context, req StartPipeline) (RunStarted, error) {
	p := req.Pipeline
	if p == nil {
		var err error
		if p, err = e.Pipeline(req.Name); err != nil {
			return RunStarted{}, err
		}
	}
	if req.Allow != nil {
		if err := req.Allow(p); err != nil {
			return RunStarted{Pipeline: p}, err
		}
	}
	payload, err := CheckPayload(req.Payload, PayloadObject)
	if err != nil {
		return RunStarted{Pipeline: p}, err
	}
	if payload == nil {
		payload = json.RawMessage(`{}`)
	}
	if e.ledger == nil {
		return RunStarted{Pipeline: p}, fmt.Errorf("start pipeline %s: no ledger is open", p.Name)
	}
	res, err := e.startRun(ctx, e.ledger, commands.StartRun{Pipeline: p, Trigger: req.Trigger, Payload: payload, SubmittedBy: req.By,
		Config: e.config, Now: now(req.Now)})
	return RunStarted{RunStartedResult: res, Pipeline: p}, err
}

// Pipeline is the Engine's pipeline named name, or a
// *PipelineNotFoundError.
func (e *Engine) Pipeline(name string) (*pipeline.Pipeline, error) {
	set := e.pipelines.Set
	if set != nil {
		if p, ok := set.Pipelines[name]; ok {
			return p, nil
		}
	}
	var known []string
	if set != nil {
		for n := range set.Pipelines {
			known = append(known, n)
		}
	}
	slices.Sort(known)
	return nil, &PipelineNotFoundError{Name: name, Known: known, Nearest: config.Suggest(name, known)}
}
