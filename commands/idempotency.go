package commands

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// MaxIdempotencyKey caps an idempotency key (it names a stream).
const MaxIdempotencyKey = 255

// ErrIdempotencyConflict means an idempotency key names a job of another
// plugin or command.
var ErrIdempotencyConflict = errors.New("idempotency key conflict")

// IdempotencyConflictError says which job holds a key that an enqueue of
// another plugin or command gave.
type IdempotencyConflictError struct {
	Key             string
	JobID           string // the job the key names
	Plugin, Command string // that job's
	WantPlugin      string // the enqueue's
	WantCommand     string
}

func (e *IdempotencyConflictError) Error() string {
	return fmt.Sprintf("idempotency key %q names job %s of %s %s, not %s %s: use another key for another plugin or command",
		e.Key, e.JobID, e.Plugin, e.Command, e.WantPlugin, e.WantCommand)
}

// Unwrap makes it an ErrIdempotencyConflict.
func (e *IdempotencyConflictError) Unwrap() error { return ErrIdempotencyConflict }

// idempotencyWindow is how long a key names its job.
func (cmd *Enqueue) idempotencyWindow() time.Duration {
	return cmp.Or(cmd.IdempotencyTTL, cmd.DefaultDedupeTTL)
}

// idempotent reads the key's stream: the job it names within the window,
// else the idempotency.reserved that makes it name this one. The writer
// decides one enqueue at a time, so of concurrent enqueues with one key the
// first reserves it and the others read its job.
func (cmd *Enqueue) idempotent(tx *ledger.Tx, meta ledger.Meta) (existing string, reserve ledger.NewEvent, err error) {
	stream := events.IdempotencyStream(cmd.IdempotencyKey)
	last, ok, err := tx.LastEvent(stream)
	if err != nil {
		return "", reserve, err
	}
	// Its version, not its last event's: an archive may have moved its events.
	version, err := tx.StreamVersion(stream)
	if err != nil {
		return "", reserve, err
	}
	if ok {
		var r events.IdempotencyReservedData
		if err := json.Unmarshal(last.Data, &r); err != nil {
			return "", reserve, fmt.Errorf("read %s v%d: %w", stream, last.Version, err)
		}
		if window := cmd.idempotencyWindow(); window <= 0 || cmd.Now.Sub(last.RecordedAt) < window {
			if r.Plugin != cmd.Plugin || r.Command != cmd.Command {
				return "", reserve, &IdempotencyConflictError{Key: cmd.IdempotencyKey, JobID: r.JobID, Plugin: r.Plugin, Command: r.Command,
					WantPlugin: cmd.Plugin, WantCommand: cmd.Command}
			}
			return r.JobID, reserve, nil
		}
	}
	return "", ledger.NewEvent{Stream: stream, ExpectedVersion: version, Type: events.IdempotencyReserved,
		Data: events.IdempotencyReservedData{JobID: cmd.JobID, Plugin: cmd.Plugin, Command: cmd.Command}, Meta: meta}, nil
}
