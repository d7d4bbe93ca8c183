package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

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

// ByPipeline is the submitted_by of a pipeline step's job.
const ByPipeline = "pipeline"

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
					Pipeline: pl, Trigger: TriggerEvent, Payload: payload, EventType: ev.Type, SubmittedBy: ByPipeline,
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

// hooks starts the on-hook pipelines of j's end, if j's plugin says
// notify_on_complete. It returns the hooks that did not fire (past
// service.max_hook_depth, or unable to start), for j's terminal event.
func (p *Pipelines) hooks(tx *ledger.Tx, j *Job, end *jobEnd, seen map[string]bool) ([]ledger.NewEvent, []events.DroppedRoute, error) {
	set := p.set()
	signal := hookSignal(*end)
	if set == nil || signal == "" || !p.config().Plugin(j.Plugin).NotifyOnComplete {
		return nil, nil, nil
	}
	hooked := set.Hooked(signal)
	if len(hooked) == 0 {
		return nil, nil, nil
	}
	var evs []ledger.NewEvent
	var dropped []events.DroppedRoute
	limit := p.config().Service.MaxHookDepth
	if limit <= 0 {
		limit = config.DefaultMaxHookDepth
	}
	depth, eventType := j.HookDepth+1, string(signal) // the signal is the run's input event type
	payload, err := json.Marshal(map[string]any{
		"job_id": j.JobID, "plugin": j.Plugin, "command": j.Command, "status": end.Status, "error": end.Error, "result": rawOrNull(end.parse().Result),
	})
	if err != nil {
		return nil, nil, err
	}
	for _, pl := range hooked {
		if depth > limit {
			dropped = append(dropped, events.DroppedRoute{Plugin: "pipeline:" + pl.Name, EventType: eventType, Depth: depth, Limit: limit,
				Reason: fmt.Sprintf("hook depth %d would pass service.max_hook_depth (%d): the hooks may loop", depth, limit)})
			continue
		}
		more, _, err := p.startRun(tx, StartRun{
			Pipeline: pl, Trigger: TriggerHook, Payload: payload, EventType: eventType, SubmittedBy: ByPipeline,
			Config: p.config(), Now: end.Now, HookDepth: depth,
		}, seen)
		if errors.Is(err, ErrInvalidCommand) {
			dropped = append(dropped, events.DroppedRoute{Plugin: "pipeline:" + pl.Name, EventType: eventType, Depth: depth, Limit: limit,
				Reason: fmt.Sprintf("pipeline %s cannot start: %v", pl.Name, err)})
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("start pipeline %s on %s: %w", pl.Name, signal, err)
		}
		evs = append(evs, more...)
	}
	return evs, dropped, nil
}

// hookSignal is the on-hook signal of a job's end ("" for a cancel).
func hookSignal(end jobEnd) pipeline.HookSignal {
	switch {
	case end.Status == events.StatusSucceeded:
		return pipeline.HookCompleted
	case end.Status == events.StatusDead && end.Timeout:
		return pipeline.HookTimedOut
	case end.Status == events.StatusDead:
		return pipeline.HookFailed
	}
	return ""
}

// withDroppedHooks records the hooks that did not fire in the job's
// terminal event among evs.
func withDroppedHooks(evs []ledger.NewEvent, jobID string, dropped []events.DroppedRoute) {
	if len(dropped) == 0 {
		return
	}
	stream := events.JobStream(jobID)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Stream != stream {
			continue
		}
		switch d := evs[i].Data.(type) {
		case events.AttemptEnded:
			d.DroppedRoutes = append(slices.Clone(d.DroppedRoutes), dropped...)
			evs[i].Data = d
			return
		case events.Dead:
			d.DroppedHooks = dropped
			evs[i].Data = d
			return
		}
	}
}

func rawOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// stepEnded moves j's run on from j's end: pipeline.step_ended with the
// run's bookkeeping, the next steps' jobs, a join, and pipeline.run_finished
// when nothing of the run is outstanding.
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
	s := &stepper{p: p, tx: tx, pl: pl, cfg: p.config(), runID: step.Run, state: &state, now: end.Now,
		correlation: j.Correlation, hookDepth: j.HookDepth, seen: seen, known: map[string]jobOutput{}}
	state.Outstanding--
	for _, id := range step.Splits {
		if sp := s.split(id); sp != nil {
			sp.Outstanding--
		}
	}
	at := position{splits: step.Splits, branches: step.Branches, depth: j.Depth + 1, parent: j.JobID}
	s.here = at
	entry := events.BranchEnd{Node: step.Node, JobID: j.JobID, Status: end.Status, Error: end.Error}
	emitted, err := emittedEvents(end.Emitted)
	if err != nil {
		return nil, err
	}
	s.known[j.JobID] = jobOutput{plugin: j.Plugin, command: j.Command, result: res.Result, events: emitted, context: j.Context}
	switch {
	case lookupErr != nil:
		entry.Status, entry.Error = events.StatusDead, lookupErr.Error()
		s.pathEnd(at, entry)
	case end.Status != events.StatusSucceeded:
		s.pathEnd(at, entry)
	default:
		node := pl.Nodes[step.Node]
		if node == nil {
			entry.Status, entry.Error = events.StatusDead, fmt.Sprintf("pipeline %s has no step %q", pl.Name, step.Node)
			s.pathEnd(at, entry)
			break
		}
		ended := false
		for _, out := range outputs(end, res) {
			e, err := s.enter(node.Next, out, j.Context, at, nil)
			if err != nil {
				return nil, err
			}
			ended = ended || e
		}
		if ended {
			s.pathEnd(at, entry)
		}
	}
	if err := s.closeReady(); err != nil {
		return nil, err
	}
	meta := ledger.Meta{CorrelationID: j.Correlation, CausationID: j.JobID, Actor: ByPipeline}
	s.progress.State = state
	evs := []ledger.NewEvent{{Stream: stream, ExpectedVersion: version, Type: events.PipelineStepEnded, Meta: meta,
		Data: events.StepEndedData{RunID: step.Run, JobID: j.JobID, Node: step.Node, Status: end.Status, RunProgress: s.progress}}}
	fin, err := s.finished(version+1, meta)
	if err != nil {
		return nil, err
	}
	evs = append(evs, fin...)
	return append(evs, s.evs...), nil
}

// outputs are the input events a succeeded step hands its next step: each
// event it emitted, or one ductile.step.succeeded with its result.
func outputs(end jobEnd, res response) []input {
	if len(end.Emitted) == 0 {
		payload, _ := json.Marshal(map[string]json.RawMessage{"result": rawOrNull(res.Result)})
		return []input{{typ: EventStepSucceeded, payload: payload}}
	}
	out := make([]input, len(end.Emitted))
	for i, ev := range end.Emitted {
		payload := ev.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("{}")
		}
		out[i] = input{typ: ev.Type, payload: payload}
	}
	return out
}

// stepper enters a run's nodes in one decision, keeping the run's
// bookkeeping (state) and what it did (progress, evs).
type stepper struct {
	p           *Pipelines // the hooks of a job that dies at once
	tx          *ledger.Tx
	pl          *pipeline.Pipeline
	cfg         *config.Config
	runID       string
	state       *events.RunState
	progress    events.RunProgress
	evs         []ledger.NewEvent // the jobs' events
	now         time.Time
	correlation string // "" until the first job of a fresh root
	hookDepth   int
	by          string
	here        position // where the decision's cause stands: a join's job follows it
	firstJob    string
	seen        map[string]bool
	configs     map[string]json.RawMessage
	known       map[string]jobOutput // the jobs of this decision's ends, not in the ledger yet
}

// jobOutput is what a join or the run's end reads of a job that ended a
// path: its plugin and command, its result and emitted events (each
// {"type", "payload"}) if it succeeded, and its context.
type jobOutput struct {
	plugin, command string
	result          json.RawMessage
	events          []json.RawMessage
	context         json.RawMessage
}

// emittedEvents are evs as a join's input lists them.
func emittedEvents(evs []router.Event) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, ev := range evs {
		b, err := json.Marshal(map[string]any{"type": ev.Type, "payload": rawOrNull(ev.Payload)})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// output is job id's output: from this decision, or read from its stream
// (job.enqueued, and the response of its job.succeeded).
func (s *stepper) output(id string) (jobOutput, error) {
	if out, ok := s.known[id]; ok {
		return out, nil
	}
	evs, err := s.tx.ReadStream(events.JobStream(id))
	if err != nil {
		return jobOutput{}, err
	}
	var out jobOutput
	for _, ev := range evs {
		switch ev.Type {
		case events.JobEnqueued:
			var d struct {
				Plugin  string          `json:"plugin"`
				Command string          `json:"command"`
				Context json.RawMessage `json:"context"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return jobOutput{}, fmt.Errorf("read %s: %w", ev.Stream, err)
			}
			out.plugin, out.command, out.context = d.Plugin, d.Command, d.Context
		case events.JobSucceeded:
			var d struct {
				Response json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return jobOutput{}, fmt.Errorf("read %s: %w", ev.Stream, err)
			}
			e := jobEnd{Response: d.Response}
			r := e.parse()
			out.result = r.Result
			if out.events, err = emittedEvents(e.Emitted); err != nil {
				return jobOutput{}, err
			}
		}
	}
	if s.known == nil {
		s.known = map[string]jobOutput{}
	}
	s.known[id] = out
	return out, nil
}

// position is where a job stands: its open splits, its branch in each,
// its depth and its parent job.
type position struct {
	splits   []string
	branches []int
	depth    int
	parent   string
}

func (at position) inside(split string, branch int) position {
	at.splits = append(slices.Clone(at.splits), split)
	at.branches = append(slices.Clone(at.branches), branch)
	return at
}

// input is the event a node is entered with.
type input struct {
	typ     string
	payload json.RawMessage
}

func (s *stepper) split(id string) *events.OpenSplit {
	for i := range s.state.Splits {
		if s.state.Splits[i].ID == id {
			return &s.state.Splits[i]
		}
	}
	return nil
}

func (s *stepper) pluginConfig(plugin string) json.RawMessage {
	if b, ok := s.configs[plugin]; ok {
		return b
	}
	b, err := json.Marshal(s.cfg.Plugin(plugin).Config)
	if err != nil || string(b) == "null" {
		b = json.RawMessage("{}")
	}
	if s.configs == nil {
		s.configs = map[string]json.RawMessage{}
	}
	s.configs[plugin] = b
	return b
}

// enter enters node id (and, past bypassed ones, its next) with in and
// ctx at position at. It reports whether the path reached its end without
// a job or split (every node bypassed). fail, when set, is an error the
// entered step's job ends dead with at once (a join's context conflict).
func (s *stepper) enter(id string, in input, ctx json.RawMessage, at position, fail error) (bool, error) {
	for id != "" {
		n := s.pl.Nodes[id]
		if n == nil {
			// A compiled pipeline never says so; a bad one fails its run, not the completion.
			s.pathEnd(at, events.BranchEnd{Node: id, Status: events.StatusDead, Error: fmt.Sprintf("pipeline %s has no step %q", s.pl.Name, id)})
			return false, nil
		}
		if len(n.On) > 0 && !slices.Contains(n.On, in.typ) {
			// Branching on the event type the step before emitted.
			s.progress.Skipped = append(s.progress.Skipped, events.SkippedStep{Node: n.ID, Event: in.typ,
				Reason: fmt.Sprintf("the event is %s, not %s (on:)", in.typ, strings.Join(n.On, " or "))})
			id = n.Bypass()
			continue
		}
		if n.If != nil {
			var cfg json.RawMessage
			if n.Kind == pipeline.KindUses {
				cfg = s.pluginConfig(n.Plugin)
			}
			ok, err := n.If.Eval(pipeline.NewScope(in.payload, ctx, cfg))
			if err != nil {
				reason := "its if could not be evaluated: " + err.Error()
				s.progress.Dropped = append(s.progress.Dropped, events.DroppedStep{Node: n.ID, Reason: reason})
				s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: "step " + n.ID + ": " + reason})
				return false, nil
			}
			if !ok {
				s.progress.Skipped = append(s.progress.Skipped, events.SkippedStep{Node: n.ID, Reason: "if was false"})
				id = n.Bypass() // a gated group or call is skipped whole
				continue
			}
		}
		if limit, depth := s.pl.MaxDepth, at.depth-s.state.BaseDepth; limit > 0 && depth > limit {
			// Counted from the run's start, not from its tree's root.
			reason := fmt.Sprintf("depth %d would pass the pipeline's max_depth (%d): the step is not run", depth, limit)
			s.progress.Dropped = append(s.progress.Dropped, events.DroppedStep{Node: n.ID, Depth: depth, Limit: limit, Reason: reason})
			s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: "step " + n.ID + ": " + reason})
			return false, nil
		}
		if n.Kind == pipeline.KindSplit {
			return false, s.open(n, in, ctx, at, fail)
		}
		return false, s.job(n, in, ctx, at, fail)
	}
	return true, nil
}

// job enqueues n's job. A claim that would change inherited baggage, or
// any error making its input or preparing its job (a payload or context
// nested too deep), records the job dead at once, with why; a job that
// cannot be prepared even so (its input is what is at fault) ends the path
// dead without one. Only the ledger's errors fail the decision.
func (s *stepper) job(n *pipeline.Node, in input, ctx json.RawMessage, at position, fail error) error {
	scope := pipeline.NewScope(in.payload, ctx, s.pluginConfig(n.Plugin)) // one decode for the claims and the with
	newCtx, payload := ctx, in.payload
	if fail == nil && len(n.Baggage) > 0 {
		newCtx, fail = n.Accrete(scope)
	}
	if fail == nil && len(n.With) > 0 {
		payload, fail = n.Input(scope)
	}
	if fail != nil {
		newCtx, payload = ctx, in.payload
	}
	enq, err := s.prepareJob(n, in.typ, payload, newCtx, at)
	if err != nil && fail == nil {
		fail = err
		enq, err = s.prepareJob(n, in.typ, in.payload, ctx, at)
	}
	if err != nil {
		reason := fmt.Sprintf("step %s: its job cannot be enqueued: %v", n.ID, fail)
		if fail != err {
			reason += fmt.Sprintf(" (nor recorded dead: %v)", err)
		}
		s.progress.Dropped = append(s.progress.Dropped, events.DroppedStep{Node: n.ID, Reason: reason})
		s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: reason})
		return nil
	}
	evs, _, err := enq.decide(s.tx, nil)
	if err != nil {
		return fmt.Errorf("step %s: %w", n.ID, err) // prepared already: the ledger's
	}
	if s.correlation == "" {
		s.correlation = enq.JobID // the run's first job roots its tree
	}
	if s.firstJob == "" {
		s.firstJob = enq.JobID
	}
	s.evs = append(s.evs, evs...)
	rj := events.RunJob{JobID: enq.JobID, Node: n.ID, Event: in.typ}
	if fail != nil {
		// Recorded, and dead at once: its plugin does not run.
		rj.Error = fail.Error()
		dead := events.Dead{Attempt: 1, Reason: fail.Error()}
		hookEvs, dropped, err := s.p.hooks(s.tx, &Job{Enqueued: events.Enqueued{JobID: enq.JobID, Plugin: n.Plugin, Command: n.Command, HookDepth: s.hookDepth}},
			&jobEnd{Status: events.StatusDead, Error: fail.Error(), Now: s.now}, s.seen)
		if err != nil {
			return err
		}
		dead.DroppedHooks = dropped
		s.evs = append(s.evs, ledger.NewEvent{Stream: events.JobStream(enq.JobID), ExpectedVersion: 1, Type: events.JobDead,
			Data: dead, Meta: ledger.Meta{CorrelationID: s.correlation, Actor: ByPipeline}})
		s.evs = append(s.evs, hookEvs...)
		s.progress.Enqueued = append(s.progress.Enqueued, rj)
		if s.known == nil {
			s.known = map[string]jobOutput{}
		}
		s.known[enq.JobID] = jobOutput{plugin: n.Plugin, command: n.Command, context: storedContext(ctx)}
		s.pathEnd(at, events.BranchEnd{Node: n.ID, JobID: enq.JobID, Status: events.StatusDead, Error: fail.Error()})
		return nil
	}
	s.progress.Enqueued = append(s.progress.Enqueued, rj)
	s.state.Outstanding++
	for _, id := range at.splits {
		if sp := s.split(id); sp != nil {
			sp.Outstanding++
		}
	}
	return nil
}

// prepareJob is n's job with payload and context at position at, prepared
// (checked and encoded): its error is the job's, never the ledger's.
func (s *stepper) prepareJob(n *pipeline.Node, typ string, payload, ctx json.RawMessage, at position) (Enqueue, error) {
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	by := s.by
	if by == "" {
		by = ByPipeline
	}
	enq := JobFor(s.cfg, n.Plugin, n.Command, by)
	u, err := uuid.NewV7()
	if err != nil {
		return enq, err
	}
	// The envelope's event id is the job's: the core assigns it (spec §7.3).
	enq.JobID, enq.Now, enq.Payload, enq.Context = u.String(), s.now, payload, ctx
	enq.SourceEventID = enq.JobID
	if d := events.JSONDepth(payload); d > MaxPayloadDepth {
		// Checked before the envelope is encoded around it.
		return enq, fmt.Errorf("%w: payload nests %d levels deep; a payload may nest at most %d", ErrInvalidCommand, d, MaxPayloadDepth)
	}
	if enq.Event, err = json.Marshal(events.Envelope{Type: typ, Payload: payload, EventID: enq.JobID,
		Source: "pipeline:" + s.pl.Name, Timestamp: Time(s.now)}); err != nil {
		return enq, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	enq.Pipeline = &events.PipelineStep{Run: s.runID, Pipeline: s.pl.Name, Hash: s.pl.Hash, Node: n.ID,
		Splits: slices.Clone(at.splits), Branches: slices.Clone(at.branches)}
	enq.Depth, enq.ParentJobID, enq.Correlation, enq.HookDepth = at.depth, at.parent, s.correlation, s.hookDepth
	return enq, enq.prepare()
}

// open opens an instance of split n and enters each branch.
func (s *stepper) open(n *pipeline.Node, in input, ctx json.RawMessage, at position, fail error) error {
	newCtx := ctx
	if fail == nil && len(n.Baggage) > 0 {
		newCtx, fail = n.Accrete(pipeline.NewScope(in.payload, ctx, nil))
	}
	if fail != nil {
		s.progress.Dropped = append(s.progress.Dropped, events.DroppedStep{Node: n.ID, Reason: fail.Error()})
		s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: fail.Error()})
		return nil
	}
	u, err := uuid.NewV7()
	if err != nil {
		return err
	}
	id := u.String()
	s.state.Splits = append(s.state.Splits, events.OpenSplit{ID: id, Node: n.ID, Outer: slices.Clone(at.splits),
		OuterBranch: slices.Clone(at.branches)})
	s.progress.Opened = append(s.progress.Opened, id)
	for i, b := range n.Branches {
		bat := at.inside(id, i)
		ended, err := s.enter(b, in, newCtx, bat, nil)
		if err != nil {
			return err
		}
		if ended {
			s.pathEnd(bat, events.BranchEnd{Node: b, Status: events.StatusSkipped})
		}
	}
	return nil
}

func failed(st events.Status) bool { return st == events.StatusDead || st == events.StatusCanceled }

// pathEnd records e as ending a path at position at: a branch entry of its
// innermost split, or a result of the run.
func (s *stepper) pathEnd(at position, e events.BranchEnd) {
	if n := len(at.splits); n > 0 {
		if sp := s.split(at.splits[n-1]); sp != nil {
			e.Branch = at.branches[n-1]
			sp.Branches = append(sp.Branches, e)
			return
		}
	}
	if e.Status == events.StatusSkipped {
		return // no job: nothing to report
	}
	s.state.Results = append(s.state.Results, events.PathEnd{JobID: e.JobID, Node: e.Node, Status: e.Status, Error: e.Error})
	if failed(e.Status) {
		s.state.Failed = true
		if s.state.Error == "" {
			s.state.Error = e.Error
			if s.state.Error == "" {
				s.state.Error = fmt.Sprintf("step %s ended %s", e.Node, e.Status)
			}
		}
	}
}

// closeReady closes every open split instance with nothing outstanding,
// innermost first (a join entered counts in the splits around it).
func (s *stepper) closeReady() error {
	for {
		i := len(s.state.Splits) - 1
		for ; i >= 0 && s.state.Splits[i].Outstanding > 0; i-- {
		}
		if i < 0 {
			return nil
		}
		sp := s.state.Splits[i]
		s.state.Splits = slices.Delete(s.state.Splits, i, i+1)
		if err := s.close(sp); err != nil {
			return err
		}
	}
}

// close ends a split instance: its join is entered (once: the instance is
// gone from the state in the same decision), or, if a branch failed and
// the split does not continue on error, its path fails.
func (s *stepper) close(sp events.OpenSplit) error {
	at := position{splits: sp.Outer, branches: sp.OuterBranch, depth: s.here.depth, parent: s.here.parent}
	var n *pipeline.Node
	if s.pl != nil {
		n = s.pl.Nodes[sp.Node]
	}
	if n == nil {
		msg := fmt.Sprintf("split %s: its pipeline's step is not found: the join is not run", sp.Node)
		s.progress.Closed = append(s.progress.Closed, events.ClosedSplit{Split: sp.ID, Node: sp.Node, Status: events.SplitFailed, Error: msg})
		s.pathEnd(at, events.BranchEnd{Node: sp.Node, Status: events.StatusDead, Error: msg})
		return nil
	}
	var failures []string
	for _, b := range sp.Branches {
		if failed(b.Status) {
			what := fmt.Sprintf("branch %d (step %s) ended %s", b.Branch, b.Node, b.Status)
			if b.Error != "" {
				what += ": " + b.Error
			}
			failures = append(failures, what)
		}
	}
	if len(failures) > 0 && !n.ContinueOnError {
		msg := "split " + n.ID + ": " + strings.Join(failures, "; ")
		s.progress.Closed = append(s.progress.Closed, events.ClosedSplit{Split: sp.ID, Node: n.ID, Status: events.SplitFailed, Error: msg})
		s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: msg})
		return nil
	}
	if n.Next == "" {
		s.progress.Closed = append(s.progress.Closed, events.ClosedSplit{Split: sp.ID, Node: n.ID, Status: events.SplitEnded})
		for _, b := range sp.Branches {
			s.pathEnd(at, b)
		}
		return nil
	}
	type entry struct {
		Branch int               `json:"branch"`
		Node   string            `json:"node"`
		JobID  string            `json:"job_id"`
		Status events.Status     `json:"status"`
		Result json.RawMessage   `json:"result"`
		Events []json.RawMessage `json:"events"`
	}
	entries := make([]entry, len(sp.Branches))
	var contexts []json.RawMessage
	for i, b := range sp.Branches {
		entries[i] = entry{Branch: b.Branch, Node: b.Node, JobID: b.JobID, Status: b.Status, Result: json.RawMessage("null"), Events: []json.RawMessage{}}
		if b.JobID == "" {
			continue
		}
		out, err := s.output(b.JobID)
		if err != nil {
			return err
		}
		entries[i].Result = rawOrNull(out.result)
		if out.events != nil {
			entries[i].Events = out.events
		}
		contexts = append(contexts, out.context)
	}
	ctx, mergeErr := mergeContexts(n.Next, sp.Context, contexts)
	payload, err := json.Marshal(map[string]any{"branches": entries})
	if err != nil {
		return err
	}
	s.progress.Closed = append(s.progress.Closed, events.ClosedSplit{Split: sp.ID, Node: n.ID, Status: events.SplitJoined})
	ended, err := s.enter(n.Next, input{typ: EventJoin, payload: payload}, ctx, at, mergeErr)
	if err != nil {
		return err
	}
	if ended && mergeErr != nil {
		// Every step from the join on was bypassed: the conflict fails the path all the same.
		s.pathEnd(at, events.BranchEnd{Node: n.Next, Status: events.StatusDead, Error: mergeErr.Error()})
		return nil
	}
	if ended {
		for _, b := range sp.Branches {
			s.pathEnd(at, b)
		}
	}
	return nil
}

// mergeContexts is the split's context deep-merged with each branch's
// last one (pipeline.MergeContexts); a path two branches set differently
// is a *BaggageError. Branches that kept the split's context change
// nothing.
func mergeContexts(join string, base json.RawMessage, branches []json.RawMessage) (json.RawMessage, error) {
	var changed []json.RawMessage
	for _, b := range branches {
		if len(b) > 0 && string(b) != string(base) {
			changed = append(changed, b)
		}
	}
	if len(changed) == 0 {
		return base, nil
	}
	merged, err := pipeline.MergeContexts(join, base, changed...)
	if err != nil {
		return base, err
	}
	return merged, nil
}

// finished is pipeline.run_finished at version, if nothing of the run is
// outstanding, with each path end's job's result read.
func (s *stepper) finished(version int64, meta ledger.Meta) ([]ledger.NewEvent, error) {
	if s.state.Outstanding > 0 || len(s.state.Splits) > 0 {
		return nil, nil
	}
	status := events.RunSucceeded
	if s.state.Failed {
		status = events.RunFailed
	}
	results := make([]events.RunResult, len(s.state.Results))
	for i, e := range s.state.Results {
		results[i] = events.RunResult{JobID: e.JobID, Node: e.Node, Status: e.Status, Error: e.Error}
		if e.JobID == "" {
			continue
		}
		out, err := s.output(e.JobID)
		if err != nil {
			return nil, err
		}
		results[i].Plugin, results[i].Command, results[i].Result = out.plugin, out.command, out.result
	}
	return []ledger.NewEvent{{Stream: events.RunStream(s.runID), ExpectedVersion: version, Type: events.PipelineRunFinished, Meta: meta,
		Data: events.RunFinishedData{RunID: s.runID, Status: status, Error: s.state.Error, Results: results}}}, nil
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
		Data: events.CompiledData{Name: pl.Name, Hash: pl.Hash, Pipeline: body}, Meta: ledger.Meta{Actor: ByPipeline}}}, nil
}

// checkContext refuses a job context that is not a JSON object (absent and
// null are none).
func checkContext(ctx json.RawMessage) error {
	t := strings.TrimSpace(string(ctx))
	if t == "" || t == "null" {
		return nil
	}
	if t[0] != '{' || !json.Valid(ctx) {
		return fmt.Errorf("%w: context must be a JSON object", ErrInvalidCommand)
	}
	if d := events.JSONDepth(ctx); d > MaxPayloadDepth {
		return fmt.Errorf("%w: context nests %d levels deep; it may nest at most %d", ErrInvalidCommand, d, MaxPayloadDepth)
	}
	return nil
}

// storedContext is a job's context as job.enqueued stores it: absent when
// empty or null, else compact.
func storedContext(ctx json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(ctx))
	if t == "" || t == "null" {
		return nil
	}
	out, err := asStored(ctx)
	if err != nil {
		return ctx // checked valid already
	}
	return out
}
