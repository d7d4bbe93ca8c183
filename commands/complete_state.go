package commands

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// DefaultMaxStateBytes is the size limit of a plugin's state (spec §5.9).
const DefaultMaxStateBytes = 1 << 20

// FactRule is a manifest fact_outputs rule for the job's command. A rule
// whose From is empty or "state_updates" records the plugin's
// state_updates as a fact instead of merging them into its state; any
// other From is not recorded by the core.
type FactRule struct {
	FactType string
	View     string // mirror_object
	From     string
}

// stateFacts are the fact rules that record the plugin's state_updates.
func (cmd Complete) stateFacts() []FactRule {
	var out []FactRule
	for _, rule := range cmd.Facts {
		if rule.From == "" || rule.From == "state_updates" {
			out = append(out, rule)
		}
	}
	return out
}

// stateError is a problem with the state a plugin emitted: it fails the
// attempt, unlike an error reading the ledger, which fails the command.
type stateError struct {
	kind events.Outcome
	msg  string
}

func (e *stateError) Error() string { return e.msg }

func tooLarge(limit int) error {
	return &stateError{kind: events.OutcomeStateTooLarge, msg: fmt.Sprintf("state update exceeds the %d byte limit", limit)}
}

// stateEvents turns the plugin's state_updates into facts (when a
// fact_outputs rule matches) or a write-through shallow merge.
func (cmd Complete) stateEvents(tx *ledger.Tx, j *Job) ([]ledger.NewEvent, error) {
	updates := bytes.TrimSpace(cmd.Outcome.StateUpdates)
	if len(updates) == 0 || bytes.Equal(updates, []byte("null")) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(updates, &obj); err != nil {
		return nil, &stateError{kind: events.OutcomeBadState, msg: fmt.Sprintf("state_updates must be a JSON object: %v", err)}
	}
	limit := cmd.MaxStateBytes
	if limit <= 0 {
		limit = DefaultMaxStateBytes
	}
	meta := ledger.Meta{CorrelationID: j.Correlation, CausationID: j.JobID, Actor: events.Actor(j.Plugin)}
	stream := events.PluginStream(j.Plugin)
	if facts := cmd.stateFacts(); len(facts) > 0 {
		if len(updates) > limit {
			return nil, tooLarge(limit)
		}
		var evs []ledger.NewEvent
		for _, rule := range facts {
			evs = append(evs, ledger.NewEvent{Stream: stream, ExpectedVersion: ledger.AnyVersion, Type: events.PluginFactRecorded,
				Data: events.FactRecorded{FactType: rule.FactType, JobID: j.JobID, Command: j.Command, Fact: updates, View: rule.View}, Meta: meta})
		}
		return evs, nil
	}
	current, err := currentState(tx, stream)
	if err != nil {
		return nil, err
	}
	for k, v := range obj {
		current[k] = v
	}
	merged, err := json.Marshal(current)
	if err != nil {
		return nil, err
	}
	if len(merged) > limit {
		return nil, tooLarge(limit)
	}
	return []ledger.NewEvent{{Stream: stream, ExpectedVersion: ledger.AnyVersion, Type: events.PluginStateMerged,
		Data: events.StateMerged{JobID: j.JobID, Command: j.Command, Updates: updates, State: merged}, Meta: meta}}, nil
}

// currentState is the plugin's state as its newest event left it, decoded
// for a merge (see storedState).
func currentState(tx *ledger.Tx, stream string) (map[string]json.RawMessage, error) {
	raw, err := storedState(tx, stream)
	if err != nil {
		return nil, err
	}
	state := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &state); err != nil {
		return nil, err
	}
	return state, nil
}

// storedState is the plugin's state as its newest event left it, as stored:
// the state of a plugin.state_merged event or the fact of a
// plugin.fact_recorded event (both JSON objects, as stateEvents writes
// them), and {} when the stream is empty or ends with another event.
func storedState(tx *ledger.Tx, stream string) (json.RawMessage, error) {
	empty := json.RawMessage("{}")
	ev, ok, err := tx.LastEvent(stream)
	if err != nil || !ok {
		return empty, err
	}
	switch ev.Type {
	case events.PluginStateMerged:
		var d events.StateMerged
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		return d.State, nil
	case events.PluginFactRecorded:
		var d events.FactRecorded
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		return d.Fact, nil
	}
	return empty, nil
}
