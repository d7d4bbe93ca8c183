package views

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// StepRun is what one step of a pipeline run did and what its end would
// make happen next, read from a ledger that holds that run alone (a
// sandbox's scratch ledger: pipeline dry-run --step).
type StepRun struct {
	Pipeline string `json:"pipeline"`
	Hash     string `json:"hash"`
	Step     string `json:"step"`
	Plugin   string `json:"plugin"`
	Command  string `json:"command"`
	// Ran says the step's plugin ran; false when its on: or if: bypassed
	// it, or it failed before its plugin could run (Error says why).
	Ran bool `json:"ran"`
	// Input is what the step's job received; nil when no job was made.
	Input *JobInput `json:"input,omitempty"`
	// Status is how the step's job ended (succeeded or dead); "" without a job.
	Status     events.Status `json:"status,omitempty"`
	Error      string        `json:"error,omitempty"`
	DurationMS int64         `json:"duration_ms,omitempty"`
	// Response is the plugin's response as it wrote it; Events the events
	// it emitted (the input of the steps after it).
	Response json.RawMessage `json:"response,omitempty"`
	Events   []Emitted       `json:"events"`
	Stderr   string          `json:"stderr,omitempty"`
	// State is the plugin state the response would record (nil: none).
	State json.RawMessage `json:"state,omitempty"`
	// Next are the jobs the step's end (or, for a bypassed step, its
	// bypass) would enqueue: the next steps of the run, and the jobs of
	// routes, on triggers and hooks its events and end match.
	Next []JobInput `json:"next"`
	// Skipped and Dropped are the steps of the run bypassed (on, if) or not
	// entered (max_depth, an if that cannot be evaluated) on the way.
	Skipped []events.SkippedStep `json:"skipped,omitempty"`
	Dropped []events.DroppedStep `json:"dropped,omitempty"`
	// RunStatus is the run's status after the step: running (its next
	// steps would run), succeeded or failed.
	RunStatus events.RunStatus `json:"run_status"`
	// Split, when set, is the split whose branch holds the step: a run
	// begun at the step ends with its branch, where a whole run would go
	// on to the split's join once every branch has ended.
	Split string `json:"split,omitempty"`
}

// JobInput is a job and what it receives: the event (type and payload,
// after its step's with:) and the context.
type JobInput struct {
	JobID       string          `json:"job_id,omitempty"`
	Node        string          `json:"node,omitempty"`     // its step, in a pipeline run
	Pipeline    string          `json:"pipeline,omitempty"` // that run's pipeline
	Plugin      string          `json:"plugin"`
	Command     string          `json:"command"`
	SubmittedBy string          `json:"submitted_by"`
	Event       string          `json:"event"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Context     json.RawMessage `json:"context,omitempty"`
	// Error is why the job was recorded dead at once (a baggage claim
	// that would rewrite inherited context).
	Error string `json:"error,omitempty"`
}

// Emitted is one event a plugin's response emitted.
type Emitted struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// ReadStepRun reads run runID's step node from l: the step's job (if it
// got one) and everything recorded after it. The step's job must be
// terminal, or never made.
func ReadStepRun(ctx context.Context, l *ledger.Ledger, runID, node string) (StepRun, error) {
	out := StepRun{Step: node, Events: []Emitted{}, Next: []JobInput{}, RunStatus: events.RunRunning}
	jobs := map[string]*JobInput{}
	var order []string
	var stepJob string
	var state json.RawMessage
	run := events.RunStream(runID)
	err := readAll(ctx, l, 0, 1000, ledger.Filter{}, func(ev ledger.Event) error {
		switch {
		case ev.Stream == run:
			return out.progress(ev, &stepJob)
		case ev.Type == events.JobEnqueued:
			j, err := jobInput(ev.Data)
			if err != nil {
				return fmt.Errorf("read %s: %w", ev.Stream, err)
			}
			jobs[j.JobID] = &j
			order = append(order, j.JobID)
		case ev.Type == events.JobDead:
			var d events.Dead
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return fmt.Errorf("read %s: %w", ev.Stream, err)
			}
			id, _ := strings.CutPrefix(ev.Stream, events.JobStream(""))
			if j := jobs[id]; j != nil && j.JobID != stepJob {
				j.Error = d.Reason
			}
		case ev.Type == events.PluginStateMerged && stepJob != "":
			var d events.StateMerged
			if err := json.Unmarshal(ev.Data, &d); err == nil && d.JobID == stepJob {
				state = d.State
			}
		case ev.Type == events.PluginFactRecorded && stepJob != "":
			var d events.FactRecorded
			if err := json.Unmarshal(ev.Data, &d); err == nil && d.JobID == stepJob {
				state = d.Fact
			}
		}
		return nil
	})
	if err != nil {
		return StepRun{}, fmt.Errorf("read step run: %w", err)
	}
	for _, id := range order {
		if id == stepJob {
			out.Input = jobs[id]
			continue
		}
		out.Next = append(out.Next, *jobs[id])
	}
	if stepJob == "" {
		return out, nil
	}
	evs, err := l.ReadStream(ctx, events.JobStream(stepJob))
	if err != nil {
		return StepRun{}, fmt.Errorf("read step run: %w", err)
	}
	j, err := commands.FoldJob(evs)
	if err != nil {
		return StepRun{}, fmt.Errorf("read step run: %w", err)
	}
	last := lastAttempt(evs)
	out.Plugin, out.Command, out.Status, out.Error = j.Plugin, j.Command, j.Status, j.LastError
	out.Ran = last.Attempt > 0
	out.DurationMS, out.Response, out.Stderr, out.State = last.DurationMS, last.Response, last.Stderr, state
	var resp struct {
		Events []Emitted `json:"events"`
	}
	if len(last.Response) > 0 && json.Unmarshal(last.Response, &resp) == nil && resp.Events != nil {
		out.Events = resp.Events
	}
	return out, nil
}

// progress reads one event of the run's stream into out; stepJob is set
// to the job made at out.Step.
func (out *StepRun) progress(ev ledger.Event, stepJob *string) error {
	if ev.Type == events.PipelineRunFinished {
		var d events.RunFinishedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return fmt.Errorf("read %s: %w", ev.Stream, err)
		}
		out.RunStatus = d.Status
		if d.Status == events.RunFailed && out.Error == "" && *stepJob == "" {
			out.Error = d.Error
		}
		return nil
	}
	p, ok, err := progressOf(ev)
	if err != nil || !ok {
		return err
	}
	if ev.Type == events.PipelineRunStarted {
		var d events.RunStartedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return fmt.Errorf("read %s: %w", ev.Stream, err)
		}
		out.Pipeline, out.Hash = d.Pipeline, d.Hash
		for _, j := range p.Enqueued {
			if j.Node == out.Step && *stepJob == "" {
				*stepJob = j.JobID
			}
		}
	}
	out.Skipped = append(out.Skipped, p.Skipped...)
	out.Dropped = append(out.Dropped, p.Dropped...)
	return nil
}

// jobInput is a job.enqueued's job and what it receives.
func jobInput(data []byte) (JobInput, error) {
	var d events.Enqueued
	if err := json.Unmarshal(data, &d); err != nil {
		return JobInput{}, err
	}
	j := JobInput{JobID: d.JobID, Plugin: d.Plugin, Command: d.Command, SubmittedBy: string(d.SubmittedBy), Payload: d.Payload, Context: d.Context}
	if d.Pipeline != nil {
		j.Node, j.Pipeline = d.Pipeline.Node, d.Pipeline.Pipeline
	}
	var env events.Envelope
	if len(d.Event) > 0 && json.Unmarshal(d.Event, &env) == nil {
		j.Event = env.Type
	}
	return j, nil
}
