package commands

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
)

// stepHost is the write side of a pipeline.Stepper in one decision: it
// enqueues the jobs the stepper asks for (and records dead at once those
// it must), reads the outputs of the jobs that ended paths, and gathers
// the events.
type stepHost struct {
	p           *Pipelines // the hooks of a job that dies at once
	tx          *ledger.Tx
	pl          *pipeline.Pipeline
	cfg         *config.Config
	runID       string
	now         time.Time
	correlation string // "" until the first job of a fresh root
	hookDepth   int
	by          events.Actor
	seen        map[string]bool
	evs         []ledger.NewEvent // the jobs' events
	firstJob    string
	configs     map[string]json.RawMessage
	known       map[string]pipeline.JobOutput // the jobs of this decision's ends, not in the ledger yet
}

// Job enqueues the step's job. A job whose input is at fault (req.Fail, or
// a payload or context that cannot be prepared) is recorded dead at once,
// with why; one that cannot be prepared even from the step's own input is
// dropped. Only the ledger's errors fail the decision.
func (h *stepHost) Job(req pipeline.JobRequest) (pipeline.JobAnswer, error) {
	n, fail := req.Node, req.Fail
	enq, err := h.prepareJob(n, req.Event, req.Payload, req.Context, req.At)
	if err != nil && fail == nil {
		fail = err
		enq, err = h.prepareJob(n, req.Event, req.Input, req.Inherited, req.At)
	}
	if err != nil {
		reason := fmt.Sprintf("step %s: its job cannot be enqueued: %v", n.ID, fail)
		if fail != err {
			reason += fmt.Sprintf(" (nor recorded dead: %v)", err)
		}
		return pipeline.JobAnswer{Dropped: reason}, nil
	}
	evs, _, err := enq.decide(h.tx, nil)
	if err != nil {
		return pipeline.JobAnswer{}, fmt.Errorf("step %s: %w", n.ID, err) // prepared already: the ledger's
	}
	if h.correlation == "" {
		h.correlation = enq.JobID // the run's first job roots its tree
	}
	if h.firstJob == "" {
		h.firstJob = enq.JobID
	}
	h.evs = append(h.evs, evs...)
	if fail == nil {
		return pipeline.JobAnswer{JobID: enq.JobID}, nil
	}
	// Recorded, and dead at once: its plugin does not run.
	dead := events.Dead{Attempt: 1, Reason: fail.Error()}
	hookEvs, dropped, err := h.p.hooks(h.tx, &Job{Enqueued: events.Enqueued{JobID: enq.JobID, Plugin: n.Plugin, Command: n.Command, HookDepth: h.hookDepth}},
		&jobEnd{Status: events.StatusDead, Error: fail.Error(), Now: h.now}, h.seen)
	if err != nil {
		return pipeline.JobAnswer{}, err
	}
	dead.DroppedHooks = dropped
	h.evs = append(h.evs, ledger.NewEvent{Stream: events.JobStream(enq.JobID), ExpectedVersion: 1, Type: events.JobDead,
		Data: dead, Meta: ledger.Meta{CorrelationID: h.correlation, Actor: events.ActorPipeline}})
	h.evs = append(h.evs, hookEvs...)
	if h.known == nil {
		h.known = map[string]pipeline.JobOutput{}
	}
	h.known[enq.JobID] = pipeline.JobOutput{Plugin: n.Plugin, Command: n.Command, Context: storedContext(req.Inherited)}
	return pipeline.JobAnswer{JobID: enq.JobID, Fail: fail}, nil
}

// prepareJob is n's job with payload and context at position at, prepared
// (checked and encoded): its error is the job's, never the ledger's.
func (h *stepHost) prepareJob(n *pipeline.Node, typ string, payload, ctx json.RawMessage, at pipeline.Position) (Enqueue, error) {
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	by := h.by
	if by == "" {
		by = events.ActorPipeline
	}
	enq := JobFor(h.cfg, n.Plugin, n.Command, by)
	u, err := uuid.NewV7()
	if err != nil {
		return enq, err
	}
	// The envelope's event id is the job's: the core assigns it (spec §7.3).
	enq.JobID, enq.Now, enq.Payload, enq.Context = u.String(), h.now, payload, ctx
	enq.SourceEventID = enq.JobID
	if d := events.JSONDepth(payload); d > MaxPayloadDepth {
		// Checked before the envelope is encoded around it.
		return enq, fmt.Errorf("%w: payload nests %d levels deep; a payload may nest at most %d", ErrInvalidCommand, d, MaxPayloadDepth)
	}
	if enq.Event, err = json.Marshal(events.Envelope{Type: typ, Payload: payload, EventID: enq.JobID,
		Source: "pipeline:" + h.pl.Name, Timestamp: Time(h.now)}); err != nil {
		return enq, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	enq.Pipeline = &events.PipelineStep{Run: h.runID, Pipeline: h.pl.Name, Hash: h.pl.Hash, Node: n.ID,
		Splits: slices.Clone(at.Splits), Branches: slices.Clone(at.Branches)}
	enq.Depth, enq.ParentJobID, enq.Correlation, enq.HookDepth = at.Depth, at.Parent, h.correlation, h.hookDepth
	return enq, enq.prepare()
}

// PluginConfig is the plugin's config as JSON ({} when it has none), once
// per decision.
func (h *stepHost) PluginConfig(plugin string) json.RawMessage {
	if b, ok := h.configs[plugin]; ok {
		return b
	}
	b, err := json.Marshal(h.cfg.Plugin(plugin).Config)
	if err != nil || string(b) == "null" {
		b = json.RawMessage("{}")
	}
	if h.configs == nil {
		h.configs = map[string]json.RawMessage{}
	}
	h.configs[plugin] = b
	return b
}

// Output is job id's output: from this decision, or read from its stream
// (job.enqueued, and the response of its job.succeeded).
func (h *stepHost) Output(id string) (pipeline.JobOutput, error) {
	if out, ok := h.known[id]; ok {
		return out, nil
	}
	evs, err := h.tx.ReadStream(events.JobStream(id))
	if err != nil {
		return pipeline.JobOutput{}, err
	}
	var out pipeline.JobOutput
	for _, ev := range evs {
		switch ev.Type {
		case events.JobEnqueued:
			var d struct {
				Plugin  string          `json:"plugin"`
				Command string          `json:"command"`
				Context json.RawMessage `json:"context"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return pipeline.JobOutput{}, fmt.Errorf("read %s: %w", ev.Stream, err)
			}
			out.Plugin, out.Command, out.Context = d.Plugin, d.Command, d.Context
		case events.JobSucceeded:
			var d struct {
				Response json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return pipeline.JobOutput{}, fmt.Errorf("read %s: %w", ev.Stream, err)
			}
			e := jobEnd{Response: d.Response}
			r := e.parse()
			out.Result = r.Result
			if out.Events, err = emittedEvents(e.Emitted); err != nil {
				return pipeline.JobOutput{}, err
			}
		}
	}
	if h.known == nil {
		h.known = map[string]pipeline.JobOutput{}
	}
	h.known[id] = out
	return out, nil
}
