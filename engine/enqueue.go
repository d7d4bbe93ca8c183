package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Enqueue asks for a job of a plugin command, as a front end (the API, a
// webhook, the CLI) gets asked for one.
type Enqueue struct {
	Plugin string
	// Command is the plugin's command; empty: DefaultCommand.
	Command string
	// Payload is the JSON text given, checked by CheckPayload as Kind says.
	Payload json.RawMessage
	Kind    PayloadKind
	// DedupeKey, DedupeTTL and Causation are the job's (commands.Enqueue).
	DedupeKey string
	DedupeTTL time.Duration
	Causation string
	// TaskID and TraceID are the Run protocol's correlation ids, recorded
	// on the job. IdempotencyKey makes the enqueue idempotent within the
	// service's dedupe window (service.dedupe_ttl): the same key answers
	// the job it made (Enqueued.Existing), however that job ended; with
	// another plugin or command it is an *IdempotencyConflictError.
	TaskID         string
	TraceID        string
	IdempotencyKey string
	// By is who asked: the job's submitted_by (events.ActorAPI, events.ActorCLI,
	// events.ActorWebhook).
	By events.Actor
	// Allow, when set, is asked once the target is known and before the
	// payload is checked whether the caller may enqueue it (the API's write
	// scope for a command that is not a read, a webhook's delivery id, the
	// CLI's ${VAR}s when it runs the job itself); its error is returned as
	// is.
	Allow func(events.AppliedCommand) error
	// DryRun checks everything and enqueues nothing.
	DryRun bool
	Now    time.Time
}

// Enqueued is what an Enqueue did: the job queued, the one that made it a
// duplicate (Deduped, ExistingJobID), or the one its idempotency key named
// (Existing, JobID); nothing with DryRun.
type Enqueued struct {
	commands.EnqueueResult
	Command string // the command the job runs
	// Job is the enqueue as it was (or with DryRun would be) submitted:
	// the config's defaults for its plugin.
	Job commands.Enqueue
}

// Enqueue enqueues a job of a plugin command: the target must be one the
// Engine can run (Target: a *commands.TargetError if not), the payload
// valid (a *commands.PayloadError if not), and the job is built with the
// config's retry and dedupe defaults (Defaults), then dropped as a
// duplicate or queued in one decision.
func (e *Engine) Enqueue(ctx context.Context, req Enqueue) (Enqueued, error) {
	p, err := e.Plugin(req.Plugin)
	if err != nil {
		return Enqueued{}, err
	}
	command := req.Command
	if command == "" {
		command = DefaultCommand(p, len(req.Payload) > 0)
	}
	c, err := e.targetCommand(p, command)
	if err != nil {
		return Enqueued{}, err
	}
	if req.Allow != nil {
		if err := req.Allow(c); err != nil {
			return Enqueued{}, err
		}
	}
	payload, err := CheckPayload(req.Payload, req.Kind)
	if err != nil {
		return Enqueued{}, err
	}
	job := e.Defaults(req.Plugin, command, req.By)
	job.Payload, job.DedupeKey, job.DedupeTTL, job.Causation = payload, req.DedupeKey, req.DedupeTTL, req.Causation
	job.TaskID, job.TraceID, job.IdempotencyKey = req.TaskID, req.TraceID, req.IdempotencyKey
	if !req.Now.IsZero() {
		job.Now = req.Now
	}
	out := Enqueued{Command: command, Job: job}
	if req.DryRun {
		return out, nil
	}
	if e.ledger == nil {
		return out, fmt.Errorf("enqueue %s %s: no ledger is open", req.Plugin, command)
	}
	out.EnqueueResult, err = commands.EnqueueJob(ctx, e.ledger, job)
	return out, err
}

// IdempotencyConflictError is an idempotency key given with another plugin
// or command than the job it names (HTTP 409, code idempotency_conflict).
type IdempotencyConflictError = commands.IdempotencyConflictError

// ErrIdempotencyConflict is what an *IdempotencyConflictError unwraps to.
var ErrIdempotencyConflict = commands.ErrIdempotencyConflict
