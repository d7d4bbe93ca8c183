package commands

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/router"
)

// Routing is what a success's emitted events become: a child job for every
// config route they match, with the config's defaults for its plugin.
type Routing struct {
	Config *config.Config
	// Plugin and DedupeKey are the job's: routes match on the emitting
	// plugin, and a child without a key of its own takes the job's. They
	// are given because routing is prepared before the job is loaded.
	Plugin    string
	DedupeKey string
	// Depth is the job's own depth: its routed children are one deeper,
	// and one past Config.Service.MaxRouteDepth is dropped.
	Depth  int
	Events []router.Event
	// CanRun says why a routed child's plugin command cannot run now (not
	// loaded, disabled, no such command): such a child is dropped with the
	// reason, not enqueued to fail. nil: every child can.
	CanRun func(plugin, command string) error
}

// routed is what routing a success's events came to, besides its children.
type routed struct {
	unrouted []string              // event types no route matched
	err      error                 // the events could not be routed
	dropped  []events.DroppedRoute // children past the depth limit, or whose plugin cannot run
}

// prepare routes a success's emitted events into children and fills in
// what every child takes from this completion (time, parent, producer),
// then does their work that needs no transaction (Enqueue.prepare). It
// replaces Children with prepared copies (the slice given is left alone).
// A child that cannot be prepared is left to the decision, which fails the
// completion and says why.
func (cmd *Complete) prepare() (res routed) {
	if cmd.Outcome.Kind != events.OutcomeOK {
		return res // only a success routes its children
	}
	if cmd.Pipelines.wantsResponse(cmd.PipelineJob, cmd.Routing) {
		// Decoded here, on the caller's goroutine, not by the writer.
		r := (&jobEnd{Response: cmd.Outcome.Response}).parse()
		cmd.response = &r
	}
	cmd.Children = slices.Clone(cmd.Children)
	if r := cmd.Routing; r != nil && len(r.Events) > 0 {
		children, unrouted, err := router.Route(r.Config.Routes, r.Plugin, r.DedupeKey, r.Events, cmd.Now)
		res = routed{unrouted: unrouted, err: err}
		if err != nil {
			children = nil
		}
		limit := r.Config.Service.MaxRouteDepth
		if limit <= 0 {
			limit = config.DefaultMaxRouteDepth
		}
		for _, ch := range children {
			if depth := r.Depth + 1; depth > limit {
				res.dropped = append(res.dropped, events.DroppedRoute{Plugin: ch.Plugin, Command: ch.Command, EventType: ch.EventType,
					Depth: depth, Limit: limit, Reason: fmt.Sprintf("depth %d would pass service.max_route_depth (%d): the route may loop", depth, limit)})
				continue
			}
			if topic, ok := strings.CutPrefix(ch.Plugin, config.TopicRoutePrefix); ok {
				// A route to a topic publishes the event's payload as a message.
				m, err := routedMessage(topic, r.Plugin, cmd.JobID, ch, r.Depth+1, cmd.Now)
				if err != nil {
					res.dropped = append(res.dropped, events.DroppedRoute{Plugin: ch.Plugin, EventType: ch.EventType, Depth: r.Depth + 1,
						Reason: err.Error()})
					continue
				}
				cmd.messages = append(cmd.messages, m)
				continue
			}
			if r.CanRun != nil {
				if err := r.CanRun(ch.Plugin, ch.Command); err != nil {
					res.dropped = append(res.dropped, events.DroppedRoute{Plugin: ch.Plugin, Command: ch.Command, EventType: ch.EventType,
						Depth: r.Depth + 1, Reason: err.Error()})
					continue
				}
			}
			enq := JobFor(r.Config, ch.Plugin, ch.Command, events.ActorRoute)
			enq.Payload, enq.Event, enq.DedupeKey, enq.SourceEventID, enq.Causation = ch.Payload, ch.Envelope, ch.DedupeKey, ch.EventID, ch.EventID
			enq.Depth = r.Depth + 1
			cmd.Children = append(cmd.Children, enq)
		}
		cmd.dropped = res.dropped
	}
	for i := range cmd.Children {
		child := &cmd.Children[i]
		child.Now, child.ParentJobID = cmd.Now, cmd.JobID
		if child.SubmittedBy == "" {
			child.SubmittedBy = events.ActorRoute
		}
		child.prepare()
	}
	return res
}

// routedMessage is the message a route to a topic publishes from event ch
// of job jobID of plugin: the event's payload as its body, produced by the
// plugin, the event's type and id and the job in its metadata.
func routedMessage(topic, plugin, jobID string, ch router.Child, depth int, now time.Time) (events.Message, error) {
	body := string(ch.Payload)
	if body == "" {
		body = "{}"
	}
	meta, err := json.Marshal(map[string]string{"event_type": ch.EventType, "event_id": ch.EventID, "job_id": jobID})
	if err != nil {
		return events.Message{}, err
	}
	m, err := Publish{Topic: topic, Body: body, Producer: plugin, Metadata: meta, Now: now}.message()
	m.Depth = depth
	return m, err
}
