package views

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Baggage is a job's context beside its parent's, and what the job's step
// added to it (job inspect -v).
type Baggage struct {
	Context       json.RawMessage `json:"context"`        // the job's ({} if none)
	ParentContext json.RawMessage `json:"parent_context"` // its parent's ({} if none, or no parent)
	// AddedPaths are the dotted paths of the leaves (values other than a
	// non-empty object) the job's context has and its parent's has not, or
	// has with another value, sorted.
	AddedPaths []string `json:"added_paths"`
}

// ReadBaggage reads job id's context and its parent's from their
// job.enqueued events.
func ReadBaggage(ctx context.Context, l *ledger.Ledger, id string) (Baggage, error) {
	j, err := enqueuedOf(ctx, l, id)
	if err != nil {
		return Baggage{}, err
	}
	b := Baggage{Context: orEmptyObject(j.Context), ParentContext: json.RawMessage(`{}`)}
	if j.ParentJobID != "" {
		parent, err := enqueuedOf(ctx, l, j.ParentJobID)
		switch {
		case err == nil:
			b.ParentContext = orEmptyObject(parent.Context)
		case !errorsIsNotFound(err):
			return Baggage{}, err
		}
	}
	if b.AddedPaths, err = AddedPaths(b.ParentContext, b.Context); err != nil {
		return Baggage{}, fmt.Errorf("job %s: %w", id, err)
	}
	return b, nil
}

// enqueuedOf is a job as its job.enqueued (version 1) makes it: one point
// read, whatever the length of its stream.
func enqueuedOf(ctx context.Context, l *ledger.Ledger, id string) (*commands.Job, error) {
	ev, ok, err := l.ReadStreamVersion(ctx, events.JobStream(id), 1)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &JobNotFoundError{ID: id}
	}
	return commands.FoldJob([]ledger.Event{ev})
}

func errorsIsNotFound(err error) bool {
	var notFound *JobNotFoundError
	return errors.As(err, &notFound)
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// AddedPaths are the dotted leaf paths of the JSON object child that parent
// lacks or holds with another value, sorted (never nil).
func AddedPaths(parent, child json.RawMessage) ([]string, error) {
	before, err := leaves(parent)
	if err != nil {
		return nil, fmt.Errorf("parent context: %w", err)
	}
	after, err := leaves(child)
	if err != nil {
		return nil, fmt.Errorf("context: %w", err)
	}
	added := []string{}
	for path, value := range after {
		if old, ok := before[path]; !ok || !jsonEqual(old, value) {
			added = append(added, path)
		}
	}
	slices.Sort(added)
	return added, nil
}

// leaves flattens a JSON object into its leaves by dotted path.
func leaves(raw json.RawMessage) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	var walk func(prefix string, raw json.RawMessage) error
	walk = func(prefix string, raw json.RawMessage) error {
		var object map[string]json.RawMessage
		if json.Unmarshal(raw, &object) != nil || object == nil || (len(object) == 0 && prefix != "") {
			if prefix == "" {
				return fmt.Errorf("not a JSON object: %.60s", raw)
			}
			out[prefix] = raw
			return nil
		}
		for key, value := range object {
			path := key
			if prefix != "" {
				path = prefix + "." + key
			}
			if err := walk(path, value); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk("", orEmptyObject(raw))
}

// jsonEqual compares two JSON values by meaning, not spelling.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(x)
	cb, _ := json.Marshal(y)
	return bytes.Equal(ca, cb)
}
