package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
)

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
		"job_id": j.JobID, "plugin": j.Plugin, "command": j.Command, "status": end.Status, "error": end.Error, "result": pipeline.RawOrNull(end.parse().Result),
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
			Pipeline: pl, Trigger: events.TriggerHook, Payload: payload, EventType: eventType, SubmittedBy: events.ActorPipeline,
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
