package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/router"
)

// Pipelines is what moving pipeline runs on needs of the applied config:
// the compiled pipelines (on triggers, hooks, and the version of a run
// when it is the current one) and the config (a step's job defaults, its
// plugin's config for conditions, notify_on_complete, max_hook_depth). A
// nil *Pipelines still moves runs on: it finds each run's pipeline in the
// ledger (pipeline.compiled) and uses the config's defaults; it starts no
// run (no triggers, no hooks).
type Pipelines struct {
	Set    *pipeline.Set
	Config *config.Config

	// compiled caches the compiled pipelines this value read back from the
	// ledger, by hash (a hash names one compiled form for good).
	compiled sync.Map // hash → *pipeline.Pipeline
}

// Input event types a pipeline makes.
const (
	EventPipeline      = pipeline.EventRun           // an API or CLI run's first step
	EventStepSucceeded = pipeline.EventStepSucceeded // a step that emitted no event
	EventJoin          = pipeline.EventJoin          // a join step
)

var defaultConfig = &config.Config{}

func (p *Pipelines) config() *config.Config {
	if p == nil || p.Config == nil {
		return defaultConfig
	}
	return p.Config
}

func (p *Pipelines) set() *pipeline.Set {
	if p == nil {
		return nil
	}
	return p.Set
}

// hasOn reports whether a pipeline of the set has an on trigger.
func (p *Pipelines) hasOn() bool {
	if s := p.set(); s != nil {
		for _, pl := range s.Pipelines {
			if pl.On != "" {
				return true
			}
		}
	}
	return false
}

// wantsResponse reports whether a success's end will read its response:
// a pipeline step's does, and so does a job whose emitted events start a
// run or whose end fires a hook. routing nil: its events are not known.
func (p *Pipelines) wantsResponse(pipelineJob bool, routing *Routing) bool {
	if pipelineJob {
		return true
	}
	set := p.set()
	if set == nil || len(set.Pipelines) == 0 {
		return false
	}
	if routing == nil {
		return true
	}
	for _, ev := range routing.Events {
		if len(set.Triggered(ev.Type)) > 0 {
			return true
		}
	}
	return p.config().Plugin(routing.Plugin).NotifyOnComplete && len(set.Hooked(pipeline.HookCompleted)) > 0
}

// lookup is the compiled pipeline name at hash: the current one, or the
// one recorded on its stream (pipeline.compiled), cached by p (a nil p
// reads the ledger each time).
func (p *Pipelines) lookup(tx *ledger.Tx, name, hash string) (*pipeline.Pipeline, error) {
	if s := p.set(); s != nil {
		if pl := s.Pipelines[name]; pl != nil && pl.Hash == hash {
			return pl, nil
		}
	}
	if p != nil {
		if pl, ok := p.compiled.Load(hash); ok {
			return pl.(*pipeline.Pipeline), nil
		}
	}
	// The version's own stream: its one event stays readable after an
	// archive (the newest event of each stream is carried).
	last, ok, err := tx.LastEvent(events.PipelineVersionStream(name, hash))
	if err != nil {
		return nil, err
	}
	if ok && last.Type == events.PipelineCompiled {
		var d events.CompiledData
		if err := json.Unmarshal(last.Data, &d); err != nil {
			return nil, err
		}
		pl := &pipeline.Pipeline{}
		if err := json.Unmarshal(d.Pipeline, pl); err != nil {
			return nil, fmt.Errorf("pipeline %s %s as recorded: %w", name, hash, err)
		}
		if p != nil {
			p.compiled.Store(hash, pl)
		}
		return pl, nil
	}
	return nil, fmt.Errorf("pipeline %s version %s is neither the current one nor recorded (pipeline.compiled)", name, hash)
}

// jobEnd is how a job ended, for the pipelines it moves on.
type jobEnd struct {
	Status   events.Status // succeeded, dead or canceled
	Timeout  bool          // dead after a timeout
	Error    string
	Response json.RawMessage // the plugin's response, if any
	Emitted  []router.Event  // its events, if already parsed
	Now      time.Time

	parsed  *response // Response decoded (by Complete.prepare, or parse)
	decoded bool      // parse decoded Response (in the decision)
}

// response is what a step's end reads of its plugin's response.
type response struct {
	Result json.RawMessage `json:"result"`
	Events []struct {
		Type      string          `json:"type"`
		Payload   json.RawMessage `json:"payload"`
		DedupeKey string          `json:"dedupe_key"`
	} `json:"events"`
}

// parse is the end's response decoded (once), filling in Emitted if it
// was not given.
func (e *jobEnd) parse() response {
	if e.parsed == nil {
		var r response
		if len(e.Response) > 0 {
			_ = json.Unmarshal(e.Response, &r) // the dispatcher parsed it already
			e.decoded = true
		}
		e.parsed = &r
	}
	r := *e.parsed
	if e.Emitted == nil {
		for _, ev := range r.Events {
			e.Emitted = append(e.Emitted, router.Event{Type: ev.Type, Payload: ev.Payload, DedupeKey: ev.DedupeKey})
		}
	}
	return r
}

// afterEnd is what a job's terminal event does besides: its pipeline run
// moves on (pipeline.step_ended, the next steps, a join, the run's end),
// the events it emitted start the runs whose on they are, and its end
// starts the on-hook pipelines of its signal. It returns the hooks that
// did not fire (past service.max_hook_depth), for the terminal event.
// It decodes the job's response only when something reads it: a pipeline
// step's run, an on trigger that may match an emitted event (Emitted not
// given), a hook that fires.
func (p *Pipelines) afterEnd(tx *ledger.Tx, j *Job, end *jobEnd) ([]ledger.NewEvent, []events.DroppedRoute, error) {
	set := p.set()
	hasSet := set != nil && len(set.Pipelines) > 0
	if j.Pipeline == nil && !hasSet || j.ReplayOf != "" {
		return nil, nil, nil // the common case, and a replay: one step, nothing follows it
	}
	var evs []ledger.NewEvent
	var dropped []events.DroppedRoute
	seen := map[string]bool{} // pipeline versions recorded by this decision
	if j.Pipeline != nil {
		more, err := p.stepEnded(tx, j, *end, end.parse(), seen)
		if err != nil {
			return nil, nil, err
		}
		evs = append(evs, more...)
	}
	if !hasSet {
		return evs, nil, nil
	}
	if end.Status == events.StatusSucceeded && (end.Emitted != nil || p.hasOn()) {
		if end.Emitted == nil {
			end.parse()
		}
		for _, ev := range end.Emitted {
			for _, pl := range set.Triggered(ev.Type) {
				payload := ev.Payload
				if len(payload) == 0 {
					payload = json.RawMessage("{}")
				}
				more, _, err := p.startRun(tx, StartRun{
					Pipeline: pl, Trigger: events.TriggerEvent, Payload: payload, EventType: ev.Type, SubmittedBy: events.ActorPipeline,
					Config: p.config(), Now: end.Now, ParentJobID: j.JobID, Depth: j.Depth + 1, Correlation: j.Correlation, HookDepth: j.HookDepth,
				}, seen)
				if errors.Is(err, ErrInvalidCommand) {
					// It cannot start: recorded like a dropped route, the job's end stands.
					dropped = append(dropped, events.DroppedRoute{Plugin: "pipeline:" + pl.Name, EventType: ev.Type, Depth: j.Depth + 1,
						Reason: fmt.Sprintf("pipeline %s cannot start: %v", pl.Name, err)})
					continue
				}
				if err != nil {
					return nil, nil, fmt.Errorf("start pipeline %s on %s: %w", pl.Name, ev.Type, err)
				}
				evs = append(evs, more...)
			}
		}
	}
	more, hookDropped, err := p.hooks(tx, j, end, seen)
	if err != nil {
		return nil, nil, err
	}
	return append(evs, more...), append(dropped, hookDropped...), nil
}

// stepEnded moves j's run on from j's end: pipeline.step_ended with the
// run's bookkeeping, the next steps' jobs, a join, and pipeline.run_finished
// when nothing of the run is outstanding (pipeline.Stepper).
func (p *Pipelines) stepEnded(tx *ledger.Tx, j *Job, end jobEnd, res response, seen map[string]bool) ([]ledger.NewEvent, error) {
	step := j.Pipeline
	stream := events.RunStream(step.Run)
	last, ok, err := tx.LastEvent(stream)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil // a run nobody started: nothing to move on
	}
	var state events.RunState
	switch last.Type {
	case events.PipelineRunStarted:
		var d events.RunStarted
		if err := json.Unmarshal(last.Data, &d); err != nil {
			return nil, err
		}
		state = d.State
	case events.PipelineStepEnded:
		var d events.StepEndedData
		if err := json.Unmarshal(last.Data, &d); err != nil {
			return nil, err
		}
		state = d.State
	default:
		return nil, nil // finished already
	}
	version, err := tx.StreamVersion(stream)
	if err != nil {
		return nil, err
	}
	pl, lookupErr := p.lookup(tx, step.Pipeline, step.Hash)
	h := &stepHost{p: p, tx: tx, pl: pl, cfg: p.config(), runID: step.Run, now: end.Now,
		correlation: j.Correlation, hookDepth: j.HookDepth, seen: seen}
	s := &pipeline.Stepper{Pipeline: pl, Host: h, State: &state}
	emitted, err := emittedEvents(end.Emitted)
	if err != nil {
		return nil, err
	}
	h.known = map[string]pipeline.JobOutput{j.JobID: {Plugin: j.Plugin, Command: j.Command, Result: res.Result, Events: emitted, Context: j.Context}}
	ended := pipeline.StepEnd{Step: step, JobID: j.JobID, Depth: j.Depth, Status: end.Status, Error: end.Error, Context: j.Context, Lost: lookupErr}
	if end.Status == events.StatusSucceeded {
		ended.Outputs = outputs(end, res)
	}
	if err := s.StepEnded(ended); err != nil {
		return nil, err
	}
	meta := ledger.Meta{CorrelationID: j.Correlation, CausationID: j.JobID, Actor: events.ActorPipeline}
	s.Progress.State = state
	evs := []ledger.NewEvent{{Stream: stream, ExpectedVersion: version, Type: events.PipelineStepEnded, Meta: meta,
		Data: events.StepEndedData{RunID: step.Run, JobID: j.JobID, Node: step.Node, Status: end.Status, RunProgress: s.Progress}}}
	fin, err := finished(s, step.Run, version+1, meta)
	if err != nil {
		return nil, err
	}
	evs = append(evs, fin...)
	return append(evs, h.evs...), nil
}

// finished is pipeline.run_finished at version, if nothing of the run is
// outstanding.
func finished(s *pipeline.Stepper, runID string, version int64, meta ledger.Meta) ([]ledger.NewEvent, error) {
	fin, err := s.Finished(runID)
	if err != nil || fin == nil {
		return nil, err
	}
	return []ledger.NewEvent{{Stream: events.RunStream(runID), ExpectedVersion: version, Type: events.PipelineRunFinished, Meta: meta, Data: *fin}}, nil
}

// outputs are the input events a succeeded step hands its next step: each
// event it emitted, or one ductile.step.succeeded with its result.
func outputs(end jobEnd, res response) []pipeline.Input {
	if len(end.Emitted) == 0 {
		payload, _ := json.Marshal(map[string]json.RawMessage{"result": pipeline.RawOrNull(res.Result)})
		return []pipeline.Input{{Type: EventStepSucceeded, Payload: payload}}
	}
	out := make([]pipeline.Input, len(end.Emitted))
	for i, ev := range end.Emitted {
		payload := ev.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("{}")
		}
		out[i] = pipeline.Input{Type: ev.Type, Payload: payload}
	}
	return out
}

// emittedEvents are evs as a join's input lists them.
func emittedEvents(evs []router.Event) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, ev := range evs {
		b, err := json.Marshal(map[string]any{"type": ev.Type, "payload": pipeline.RawOrNull(ev.Payload)})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
