package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// TopicListeners are what listens on topics: the config's routes whose
// from is topic:<name> and the pipelines with on: topic:<name>. A message
// published to the topic (by a publisher or as a claim's follow-up)
// enqueues each route's job and starts each pipeline's run in the same
// append as its message.published: a crash leaves the message with its
// jobs or neither.
type TopicListeners struct {
	// Pipelines is the pipeline runtime; its Config holds the routes.
	Pipelines *Pipelines
	// CanRun says why a route's plugin command cannot run now: such a
	// route is skipped (config check reports it). nil: every one can.
	CanRun func(plugin, command string) error
}

// TopicPayload is the payload a message hands its listeners: its body when
// that is a JSON object, else {"body": <body>}.
func TopicPayload(body string) json.RawMessage {
	trimmed := bytes.TrimSpace([]byte(body))
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(map[string]string{"body": body}) // a string always encodes
	return b
}

// listen is the events that enqueue the jobs and start the runs listening
// on m's topic. A route or pipeline that cannot take the message (its
// plugin cannot run, the payload is refused) is skipped.
func (tl *TopicListeners) listen(tx *ledger.Tx, m events.Message) ([]ledger.NewEvent, error) {
	if tl == nil || tl.Pipelines == nil {
		return nil, nil
	}
	source := config.TopicRoutePrefix + m.Topic
	cfg := tl.Pipelines.config()
	now, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("message %s: created_at: %w", m.ID, err)
	}
	payload := TopicPayload(m.Body)
	limit := cfg.Service.MaxRouteDepth
	if limit <= 0 {
		limit = config.DefaultMaxRouteDepth
	}
	if m.Depth > limit {
		return nil, nil // routed too deep: the route that published it may loop
	}
	var evs []ledger.NewEvent
	for _, r := range cfg.Routes {
		if r.From != source {
			continue
		}
		if tl.CanRun != nil && tl.CanRun(r.To, r.Command) != nil {
			continue
		}
		envelope, err := json.Marshal(events.Envelope{Type: source, Payload: payload, EventID: m.ID, Source: source, Timestamp: m.CreatedAt})
		if err != nil {
			return nil, err
		}
		job := JobFor(cfg, r.To, r.Command, events.ActorRoute)
		job.Payload, job.Event, job.SourceEventID, job.Causation, job.Now = payload, envelope, m.ID, m.ID, now
		job.Depth = m.Depth
		more, _, err := job.decide(tx, nil)
		if errors.Is(err, ErrInvalidCommand) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("route %s to %s: %w", source, r.To, err)
		}
		evs = append(evs, more...)
	}
	seen := map[string]bool{}
	if set := tl.Pipelines.set(); set != nil {
		for _, pl := range set.Triggered(source) {
			more, _, err := tl.Pipelines.startRun(tx, StartRun{Pipeline: pl, Trigger: events.TriggerEvent, Payload: payload, EventType: source,
				SubmittedBy: events.ActorRoute, Config: cfg, Now: now, Depth: m.Depth}, seen)
			if errors.Is(err, ErrInvalidCommand) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("start pipeline %s on %s: %w", pl.Name, source, err)
			}
			evs = append(evs, more...)
		}
	}
	return evs, nil
}
