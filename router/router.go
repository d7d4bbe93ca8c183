// Package router turns the events a plugin emitted into the jobs that config
// routes ask for (spec §7): fan-out to every matching route, exact match on
// event_type and from-plugin, no wildcards, no conditions. Unmatched events
// are dropped. The core assigns each routed event an event_id, source and
// timestamp; the child job records them as source_event_id and its envelope.
package router

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// Event is one event a plugin emitted.
type Event struct {
	Type      string
	Payload   json.RawMessage
	DedupeKey string
}

// Child is a job a route asks for.
type Child struct {
	Plugin    string
	Command   string
	EventType string // of the event routed
	EventID   string
	Envelope  json.RawMessage // {type, payload, event_id, source, timestamp, dedupe_key}
	Payload   json.RawMessage
	DedupeKey string // the event's, else the parent job's
}

// Route returns the children for events emitted by plugin `from`, in event
// order and, for one event, in route order. Events without a route are
// returned in unrouted, for logging.
func Route(routes []config.Route, from, parentDedupeKey string, evs []Event, now time.Time) (children []Child, unrouted []string, err error) {
	for _, ev := range evs {
		var env json.RawMessage // built at the event's first matching route
		var id string
		for _, r := range routes {
			if r.From != from || r.EventType != ev.Type {
				continue
			}
			if env == nil {
				u, err := uuid.NewV7()
				if err != nil {
					return nil, nil, err
				}
				id = u.String()
				payload := ev.Payload
				if len(payload) == 0 {
					payload = json.RawMessage("{}")
				}
				env, err = json.Marshal(events.Envelope{Type: ev.Type, Payload: payload, EventID: id, Source: from,
					Timestamp: now.UTC().Format(time.RFC3339Nano), DedupeKey: ev.DedupeKey})
				if err != nil {
					return nil, nil, fmt.Errorf("route event %s: %w", ev.Type, err)
				}
			}
			key := ev.DedupeKey
			if key == "" {
				key = parentDedupeKey
			}
			cmd := r.Command
			if cmd == "" {
				cmd = config.DefaultRouteCommand
			}
			children = append(children, Child{Plugin: r.To, Command: cmd, EventType: ev.Type, EventID: id, Envelope: env, Payload: ev.Payload, DedupeKey: key})
		}
		if env == nil {
			unrouted = append(unrouted, ev.Type)
		}
	}
	return children, unrouted, nil
}
