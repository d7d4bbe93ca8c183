package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/ductile/ductile/events"
)

// Stepper moves one run of a pipeline on within one decision: it enters
// steps (a uses step asks its Host for a job, a split opens an instance and
// enters each branch, on: and if: bypass a step), records where paths end,
// closes the split instances whose branches are all done (entering their
// join), and says when the run has finished. It keeps the run's
// bookkeeping in State and what it did in Progress. It reads no ledger:
// the jobs it asks for and the outputs it reads are its Host's.
type Stepper struct {
	Pipeline *Pipeline // nil: the run's version could not be found (StepEnded)
	Host     Host
	State    *events.RunState
	Progress events.RunProgress
	// Here is where the decision's cause stands: a join's job follows it.
	Here Position
}

// Host is the write side a Stepper works for.
type Host interface {
	// Job records the job of a uses step. Only the ledger's errors are
	// returned: a job that cannot be made is an answer (JobAnswer).
	Job(req JobRequest) (JobAnswer, error)
	// Output is what a join or the run's end reads of a job that ended a
	// path (the jobs of this decision included).
	Output(jobID string) (JobOutput, error)
	// PluginConfig is a plugin's config as a condition reads it (a JSON object).
	PluginConfig(plugin string) json.RawMessage
}

// Position is where a job stands: its open splits, its branch in each, its
// depth and its parent job.
type Position struct {
	Splits   []string
	Branches []int
	Depth    int
	Parent   string
}

func (at Position) inside(split string, branch int) Position {
	at.Splits = append(slices.Clone(at.Splits), split)
	at.Branches = append(slices.Clone(at.Branches), branch)
	return at
}

// Input is the event a step is entered with.
type Input struct {
	Type    string
	Payload json.RawMessage
}

// JobRequest is the job a uses step asks for. Payload and Context are its
// input after the step's with: and baggage claims; Input and Inherited are
// what the step was entered with, for a job that cannot be made of those.
// Fail, when set, is an error the job is recorded dead with at once (a
// claim, a with: or a join's context conflict failed); Payload and Context
// are then Input and Inherited.
type JobRequest struct {
	Node             *Node
	Event            string // the input event's type
	Payload, Context json.RawMessage
	Input, Inherited json.RawMessage
	At               Position
	Fail             error
}

// JobAnswer is what the Host made of a JobRequest: a job that runs, a job
// recorded dead at once (Fail), or none at all (Dropped says why).
type JobAnswer struct {
	JobID   string
	Fail    error
	Dropped string
}

// JobOutput is what a join or the run's end reads of a job that ended a
// path: its plugin and command, its result and emitted events (each
// {"type", "payload"}) if it succeeded, and its context.
type JobOutput struct {
	Plugin, Command string
	Result          json.RawMessage
	Events          []json.RawMessage
	Context         json.RawMessage
}

// StepEnd is how the job of a run's step ended, for StepEnded.
type StepEnd struct {
	Step    *events.PipelineStep // the job's place in its run
	JobID   string
	Depth   int // the job's
	Status  events.Status
	Error   string
	Context json.RawMessage // the job's
	// Outputs are the input events a success hands the next step (at
	// least one: the events it emitted, or one EventStepSucceeded).
	Outputs []Input
	// Lost says why the run's pipeline version is not known (Pipeline is
	// nil): the step's path ends dead.
	Lost error
}

// StepEnded moves the run on from the end of a step's job: its path goes
// on into the next step with each of its outputs, or ends.
func (s *Stepper) StepEnded(end StepEnd) error {
	step := end.Step
	s.State.Outstanding--
	for _, id := range step.Splits {
		if sp := s.split(id); sp != nil {
			sp.Outstanding--
		}
	}
	at := Position{Splits: step.Splits, Branches: step.Branches, Depth: end.Depth + 1, Parent: end.JobID}
	s.Here = at
	entry := events.BranchEnd{Node: step.Node, JobID: end.JobID, Status: end.Status, Error: end.Error}
	switch {
	case end.Lost != nil:
		entry.Status, entry.Error = events.StatusDead, end.Lost.Error()
		s.pathEnd(at, entry)
	case end.Status != events.StatusSucceeded:
		s.pathEnd(at, entry)
	default:
		node := s.Pipeline.Nodes[step.Node]
		if node == nil {
			entry.Status, entry.Error = events.StatusDead, fmt.Sprintf("pipeline %s has no step %q", s.Pipeline.Name, step.Node)
			s.pathEnd(at, entry)
			break
		}
		ended := false
		for _, out := range end.Outputs {
			e, err := s.Enter(node.Next, out, end.Context, at, nil)
			if err != nil {
				return err
			}
			ended = ended || e
		}
		if ended {
			s.pathEnd(at, entry)
		}
	}
	return s.CloseReady()
}

func (s *Stepper) split(id string) *events.OpenSplit {
	for i := range s.State.Splits {
		if s.State.Splits[i].ID == id {
			return &s.State.Splits[i]
		}
	}
	return nil
}

// Enter enters step id (and, past bypassed ones, its next) with in and
// ctx at position at. It reports whether the path reached its end without
// a job or split (every step bypassed). fail, when set, is an error the
// entered step's job ends dead with at once (a join's context conflict).
func (s *Stepper) Enter(id string, in Input, ctx json.RawMessage, at Position, fail error) (bool, error) {
	for id != "" {
		n := s.Pipeline.Nodes[id]
		if n == nil {
			// A compiled pipeline never says so; a bad one fails its run, not the completion.
			s.pathEnd(at, events.BranchEnd{Node: id, Status: events.StatusDead, Error: fmt.Sprintf("pipeline %s has no step %q", s.Pipeline.Name, id)})
			return false, nil
		}
		if len(n.On) > 0 && !slices.Contains(n.On, in.Type) {
			// Branching on the event type the step before emitted.
			s.Progress.Skipped = append(s.Progress.Skipped, events.SkippedStep{Node: n.ID, Event: in.Type,
				Reason: fmt.Sprintf("the event is %s, not %s (on:)", in.Type, strings.Join(n.On, " or "))})
			id = n.Bypass()
			continue
		}
		if n.If != nil {
			var cfg json.RawMessage
			if n.Kind == KindUses {
				cfg = s.Host.PluginConfig(n.Plugin)
			}
			ok, err := n.If.Eval(NewScope(in.Payload, ctx, cfg))
			if err != nil {
				reason := "its if could not be evaluated: " + err.Error()
				s.Progress.Dropped = append(s.Progress.Dropped, events.DroppedStep{Node: n.ID, Reason: reason})
				s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: "step " + n.ID + ": " + reason})
				return false, nil
			}
			if !ok {
				s.Progress.Skipped = append(s.Progress.Skipped, events.SkippedStep{Node: n.ID, Reason: "if was false"})
				id = n.Bypass() // a gated group or call is skipped whole
				continue
			}
		}
		if limit, depth := s.Pipeline.MaxDepth, at.Depth-s.State.BaseDepth; limit > 0 && depth > limit {
			// Counted from the run's start, not from its tree's root.
			reason := fmt.Sprintf("depth %d would pass the pipeline's max_depth (%d): the step is not run", depth, limit)
			s.Progress.Dropped = append(s.Progress.Dropped, events.DroppedStep{Node: n.ID, Depth: depth, Limit: limit, Reason: reason})
			s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: "step " + n.ID + ": " + reason})
			return false, nil
		}
		if n.Kind == KindSplit {
			return false, s.open(n, in, ctx, at, fail)
		}
		return false, s.job(n, in, ctx, at, fail)
	}
	return true, nil
}

// job asks for n's job. A claim that would change inherited baggage, or a
// with: that fails, records the job dead at once, with why; a job the Host
// cannot make even so ends the path dead without one.
func (s *Stepper) job(n *Node, in Input, ctx json.RawMessage, at Position, fail error) error {
	scope := NewScope(in.Payload, ctx, s.Host.PluginConfig(n.Plugin)) // one decode for the claims and the with
	newCtx, payload := ctx, in.Payload
	if fail == nil && len(n.Baggage) > 0 {
		newCtx, fail = n.Accrete(scope)
	}
	if fail == nil && len(n.With) > 0 {
		payload, fail = n.Input(scope)
	}
	if fail != nil {
		newCtx, payload = ctx, in.Payload
	}
	ans, err := s.Host.Job(JobRequest{Node: n, Event: in.Type, Payload: payload, Context: newCtx, Input: in.Payload, Inherited: ctx, At: at, Fail: fail})
	if err != nil {
		return err
	}
	if ans.JobID == "" {
		s.Progress.Dropped = append(s.Progress.Dropped, events.DroppedStep{Node: n.ID, Reason: ans.Dropped})
		s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: ans.Dropped})
		return nil
	}
	rj := events.RunJob{JobID: ans.JobID, Node: n.ID, Event: in.Type}
	if ans.Fail != nil {
		// Recorded, and dead at once: its plugin does not run.
		rj.Error = ans.Fail.Error()
		s.Progress.Enqueued = append(s.Progress.Enqueued, rj)
		s.pathEnd(at, events.BranchEnd{Node: n.ID, JobID: ans.JobID, Status: events.StatusDead, Error: ans.Fail.Error()})
		return nil
	}
	s.Progress.Enqueued = append(s.Progress.Enqueued, rj)
	s.State.Outstanding++
	for _, id := range at.Splits {
		if sp := s.split(id); sp != nil {
			sp.Outstanding++
		}
	}
	return nil
}

// open opens an instance of split n and enters each branch.
func (s *Stepper) open(n *Node, in Input, ctx json.RawMessage, at Position, fail error) error {
	newCtx := ctx
	if fail == nil && len(n.Baggage) > 0 {
		newCtx, fail = n.Accrete(NewScope(in.Payload, ctx, nil))
	}
	if fail != nil {
		s.Progress.Dropped = append(s.Progress.Dropped, events.DroppedStep{Node: n.ID, Reason: fail.Error()})
		s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: fail.Error()})
		return nil
	}
	u, err := uuid.NewV7()
	if err != nil {
		return err
	}
	id := u.String()
	s.State.Splits = append(s.State.Splits, events.OpenSplit{ID: id, Node: n.ID, Outer: slices.Clone(at.Splits),
		OuterBranch: slices.Clone(at.Branches)})
	s.Progress.Opened = append(s.Progress.Opened, id)
	for i, b := range n.Branches {
		bat := at.inside(id, i)
		ended, err := s.Enter(b, in, newCtx, bat, nil)
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
func (s *Stepper) pathEnd(at Position, e events.BranchEnd) {
	if n := len(at.Splits); n > 0 {
		if sp := s.split(at.Splits[n-1]); sp != nil {
			e.Branch = at.Branches[n-1]
			sp.Branches = append(sp.Branches, e)
			return
		}
	}
	if e.Status == events.StatusSkipped {
		return // no job: nothing to report
	}
	s.State.Results = append(s.State.Results, events.PathEnd{JobID: e.JobID, Node: e.Node, Status: e.Status, Error: e.Error})
	if failed(e.Status) {
		s.State.Failed = true
		if s.State.Error == "" {
			s.State.Error = e.Error
			if s.State.Error == "" {
				s.State.Error = fmt.Sprintf("step %s ended %s", e.Node, e.Status)
			}
		}
	}
}

// CloseReady closes every open split instance with nothing outstanding,
// innermost first (a join entered counts in the splits around it).
func (s *Stepper) CloseReady() error {
	for {
		i := len(s.State.Splits) - 1
		for ; i >= 0 && s.State.Splits[i].Outstanding > 0; i-- {
		}
		if i < 0 {
			return nil
		}
		sp := s.State.Splits[i]
		s.State.Splits = slices.Delete(s.State.Splits, i, i+1)
		if err := s.close(sp); err != nil {
			return err
		}
	}
}

// close ends a split instance: its join is entered (once: the instance is
// gone from the state in the same decision), or, if a branch failed and
// the split does not continue on error, its path fails.
func (s *Stepper) close(sp events.OpenSplit) error {
	at := Position{Splits: sp.Outer, Branches: sp.OuterBranch, Depth: s.Here.Depth, Parent: s.Here.Parent}
	var n *Node
	if s.Pipeline != nil {
		n = s.Pipeline.Nodes[sp.Node]
	}
	if n == nil {
		msg := fmt.Sprintf("split %s: its pipeline's step is not found: the join is not run", sp.Node)
		s.Progress.Closed = append(s.Progress.Closed, events.ClosedSplit{Split: sp.ID, Node: sp.Node, Status: events.SplitFailed, Error: msg})
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
		s.Progress.Closed = append(s.Progress.Closed, events.ClosedSplit{Split: sp.ID, Node: n.ID, Status: events.SplitFailed, Error: msg})
		s.pathEnd(at, events.BranchEnd{Node: n.ID, Status: events.StatusDead, Error: msg})
		return nil
	}
	if n.Next == "" {
		s.Progress.Closed = append(s.Progress.Closed, events.ClosedSplit{Split: sp.ID, Node: n.ID, Status: events.SplitEnded})
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
		out, err := s.Host.Output(b.JobID)
		if err != nil {
			return err
		}
		entries[i].Result = RawOrNull(out.Result)
		if out.Events != nil {
			entries[i].Events = out.Events
		}
		contexts = append(contexts, out.Context)
	}
	ctx, mergeErr := mergeContexts(n.Next, sp.Context, contexts)
	payload, err := json.Marshal(map[string]any{"branches": entries})
	if err != nil {
		return err
	}
	s.Progress.Closed = append(s.Progress.Closed, events.ClosedSplit{Split: sp.ID, Node: n.ID, Status: events.SplitJoined})
	ended, err := s.Enter(n.Next, Input{Type: EventJoin, Payload: payload}, ctx, at, mergeErr)
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
// last one (MergeContexts); a path two branches set differently is a
// *BaggageError. Branches that kept the split's context change nothing.
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
	merged, err := MergeContexts(join, base, changed...)
	if err != nil {
		return base, err
	}
	return merged, nil
}

// Finished is the run's end once nothing of it is outstanding (nil before):
// its status and error, and each path end's job with its result.
func (s *Stepper) Finished(runID string) (*events.RunFinishedData, error) {
	if s.State.Outstanding > 0 || len(s.State.Splits) > 0 {
		return nil, nil
	}
	status := events.RunSucceeded
	if s.State.Failed {
		status = events.RunFailed
	}
	results := make([]events.RunResult, len(s.State.Results))
	for i, e := range s.State.Results {
		results[i] = events.RunResult{JobID: e.JobID, Node: e.Node, Status: e.Status, Error: e.Error}
		if e.JobID == "" {
			continue
		}
		out, err := s.Host.Output(e.JobID)
		if err != nil {
			return nil, err
		}
		results[i].Plugin, results[i].Command, results[i].Result = out.Plugin, out.Command, out.Result
	}
	return &events.RunFinishedData{RunID: runID, Status: status, Error: s.State.Error, Results: results}, nil
}

// RawOrNull is raw, or JSON null when raw is empty: a result or payload
// as a JSON value.
func RawOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
