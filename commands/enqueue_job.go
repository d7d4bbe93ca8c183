package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Enqueue asks for a job to be queued.
type Enqueue struct {
	JobID       string // optional: assigned (UUIDv7) when empty
	Plugin      string
	Command     string
	Payload     json.RawMessage
	Event       json.RawMessage // the envelope handed to the plugin; built from Payload when empty
	SubmittedBy events.Actor
	MaxAttempts int
	BackoffBase time.Duration
	// DedupeKey, if set, drops this enqueue when a job for the same plugin
	// and command with this key succeeded within the dedupe window
	// (DedupeTTL if set, else DefaultDedupeTTL). Setting DedupeTTL also drops
	// it while such a job is queued or running (spec §3.6).
	DedupeKey        string
	DedupeTTL        time.Duration
	DefaultDedupeTTL time.Duration
	ParentJobID      string
	SourceEventID    string
	Correlation      string // the root job of the tree; the job itself when empty
	Causation        string // what caused it: a request id, an event id
	RetryOf          string // the dead or canceled job this one retries
	// Depth is how many routes lie between the job and its root (0: a root).
	Depth int
	// Pipeline, Context, ReplayOf and HookDepth are recorded as given
	// (events.Enqueued).
	Pipeline  *events.PipelineStep
	Context   json.RawMessage
	ReplayOf  string
	HookDepth int
	// TaskID and TraceID are the caller's correlation ids (the Run
	// protocol's task_id, trace_id), recorded as given.
	TaskID  string
	TraceID string
	// IdempotencyKey, if set, makes the enqueue idempotent: within the
	// window (IdempotencyTTL, else DefaultDedupeTTL) of the first enqueue
	// with the key, another one with it is answered with that job
	// (EnqueueResult.Existing), however it ended, and appends nothing; one
	// for another plugin or command is an *IdempotencyConflictError.
	IdempotencyKey string
	IdempotencyTTL time.Duration
	// RootJobID and RunAttempt place the job in a retry chain
	// (events.Enqueued): a retry sets them.
	RootJobID  string
	RunAttempt int
	Now        time.Time

	prepared *preparedEnqueue // set by prepare
}

// preparedEnqueue is what prepare makes of an Enqueue: its job.enqueued
// data encoded as the ledger stores it.
type preparedEnqueue struct {
	encoded ledger.EncodedData
}

// EnqueueResult says what happened.
type EnqueueResult struct {
	JobID   string `json:"job_id"`
	Deduped bool   `json:"deduped"`
	// ExistingJobID is the job that made this one a duplicate.
	ExistingJobID string `json:"existing_job_id,omitempty"`
	// Existing means the idempotency key named a job already: JobID is that
	// job, and nothing was appended.
	Existing bool  `json:"existing,omitempty"`
	Seq      int64 `json:"seq,omitempty"`
}

// JobFor is an Enqueue for plugin and command with the config's retry and
// dedupe defaults, submitted by by. Every producer builds its jobs with it.
func JobFor(cfg *config.Config, plugin, command string, by events.Actor) Enqueue {
	pc := cfg.Plugin(plugin)
	return Enqueue{
		Plugin: plugin, Command: command, SubmittedBy: by,
		MaxAttempts: pc.Retry.MaxAttempts, BackoffBase: pc.Retry.BackoffBase,
		DefaultDedupeTTL: cfg.Service.DedupeTTL, Now: time.Now(),
	}
}

// EnqueueJob appends a job, or drops it as a duplicate, in one decision.
func EnqueueJob(ctx context.Context, l *ledger.Ledger, cmd Enqueue) (EnqueueResult, error) {
	if err := cmd.prepare(); err != nil {
		return EnqueueResult{}, fmt.Errorf("enqueue job: %w", err)
	}
	var res EnqueueResult
	seqs, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		var evs []ledger.NewEvent
		var err error
		evs, res, err = cmd.decide(tx, nil)
		return evs, err
	})
	if err != nil {
		return EnqueueResult{}, fmt.Errorf("enqueue job: %w", err)
	}
	if len(seqs) > 0 {
		res.Seq = seqs[0]
	}
	return res, nil
}

// reservations tracks the dedupe streams touched earlier in the same
// decision: a completion releases its own key and may route children to
// streams it or a sibling already touched. Those appends are not readable
// yet, so the decision consults this instead.
type reservations map[string]pendingKey

type pendingKey struct {
	jobID     string
	succeeded bool // released by a success in this decision (else: reserved)
}

func (cmd *Enqueue) validate() error {
	switch {
	case cmd.Plugin == "":
		return fmt.Errorf("%w: plugin is required", ErrInvalidCommand)
	case cmd.Command == "":
		return fmt.Errorf("%w: command is required", ErrInvalidCommand)
	case cmd.MaxAttempts < 1:
		return fmt.Errorf("%w: max_attempts must be at least 1", ErrInvalidCommand)
	case cmd.SubmittedBy == "":
		return fmt.Errorf("%w: submitted_by is required", ErrInvalidCommand)
	case cmd.DedupeTTL < 0:
		return fmt.Errorf("%w: dedupe TTL must not be negative", ErrInvalidCommand)
	case cmd.Depth < 0:
		return fmt.Errorf("%w: depth must not be negative", ErrInvalidCommand)
	case cmd.IdempotencyTTL < 0:
		return fmt.Errorf("%w: idempotency window must not be negative", ErrInvalidCommand)
	case len(cmd.IdempotencyKey) > MaxIdempotencyKey:
		return fmt.Errorf("%w: idempotency key is %d bytes; at most %d", ErrInvalidCommand, len(cmd.IdempotencyKey), MaxIdempotencyKey)
	}
	return nil // the JSON is checked as prepare encodes it
}

// prepare checks the command and does the work that needs no transaction:
// the job's id, the envelope built from the payload, the job.enqueued data
// encoded as it will be stored. A producer calls it before submitting, so
// that its own goroutine pays for a large payload (several passes over it),
// not the writer's, which every other append waits for; decide calls it
// for a command nobody prepared. The fields its data is made of must not
// change after (Correlation and Causation may: they go in the meta).
func (cmd *Enqueue) prepare() error {
	if cmd.prepared != nil {
		return nil
	}
	if err := cmd.validate(); err != nil {
		return err
	}
	if cmd.JobID == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return err
		}
		cmd.JobID = u.String()
	}
	// Each pass over a payload counts when it is a megabyte: the payload is
	// checked and encoded once, and an envelope built here is as stored
	// already (encoding/json's output); only one given is encoded again.
	// Depth first: encoding/json refuses JSON nested over 10,000 levels as
	// invalid, and the ledger refuses it over 1,000.
	if d := events.JSONDepth(cmd.Payload); d > MaxPayloadDepth {
		return fmt.Errorf("%w: payload nests %d levels deep; a payload may nest at most %d (so that a plugin can hand it back within its response's own limit)",
			ErrInvalidCommand, d, MaxPayloadDepth)
	}
	if d := events.JSONDepth(cmd.Event); d > events.MaxJSONDepth-1 {
		return fmt.Errorf("%w: event nests %d levels deep; an event may nest at most %d", ErrInvalidCommand, d, events.MaxJSONDepth-1)
	}
	var err error
	if err := checkContext(cmd.Context); err != nil {
		return err
	}
	if cmd.Payload, err = asStored(cmd.Payload); err != nil {
		return fmt.Errorf("%w: payload is not valid JSON", ErrInvalidCommand)
	}
	switch {
	case len(cmd.Event) > 0:
		if cmd.Event, err = asStored(cmd.Event); err != nil {
			return fmt.Errorf("%w: event is not valid JSON", ErrInvalidCommand)
		}
	case len(cmd.Payload) > 0:
		if cmd.Event, err = json.Marshal(events.Envelope{
			Type: "ductile." + string(cmd.SubmittedBy), Payload: cmd.Payload,
			EventID: cmd.JobID, Source: string(cmd.SubmittedBy), Timestamp: Time(cmd.Now),
		}); err != nil {
			return err
		}
	}
	data := events.Enqueued{
		JobID: cmd.JobID, Plugin: cmd.Plugin, Command: cmd.Command, Payload: cmd.Payload,
		MaxAttempts: cmd.MaxAttempts, BackoffBaseMS: cmd.BackoffBase.Milliseconds(),
		SubmittedBy: cmd.SubmittedBy, DedupeKey: cmd.DedupeKey, DedupeTTLMS: cmd.DedupeTTL.Milliseconds(),
		ParentJobID: cmd.ParentJobID, SourceEventID: cmd.SourceEventID, Event: cmd.Event, RetryOf: cmd.RetryOf,
		Depth: cmd.Depth, Pipeline: cmd.Pipeline, Context: storedContext(cmd.Context), ReplayOf: cmd.ReplayOf, HookDepth: cmd.HookDepth,
		TaskID: cmd.TaskID, TraceID: cmd.TraceID, IdempotencyKey: cmd.IdempotencyKey, RootJobID: cmd.RootJobID, RunAttempt: cmd.RunAttempt,
	}
	encoded, err := ledger.EncodeData(data)
	if err != nil {
		return err
	}
	cmd.prepared = &preparedEnqueue{encoded: encoded}
	return nil
}

func (cmd Enqueue) decide(tx *ledger.Tx, reserved reservations) ([]ledger.NewEvent, EnqueueResult, error) {
	if err := cmd.prepare(); err != nil {
		return nil, EnqueueResult{}, err
	}
	id := cmd.JobID
	correlation := cmd.Correlation
	if correlation == "" {
		correlation = id
	}
	meta := ledger.Meta{CorrelationID: correlation, CausationID: cmd.Causation, Actor: cmd.SubmittedBy}

	var evs []ledger.NewEvent
	if cmd.IdempotencyKey != "" {
		existing, reserve, err := cmd.idempotent(tx, meta)
		if err != nil || existing != "" {
			return nil, EnqueueResult{JobID: existing, Existing: existing != ""}, err
		}
		evs = append(evs, reserve)
	}
	if cmd.DedupeKey != "" {
		stream := events.DedupeStream(cmd.Plugin, cmd.Command, cmd.DedupeKey)
		pending, touched := reserved[stream]
		if touched {
			// Succeeded just now, within any window; or reserved by a
			// sibling, in flight, which only the TTL override guards.
			if (pending.succeeded && cmd.window() > 0) || (!pending.succeeded && cmd.DedupeTTL > 0) {
				return nil, EnqueueResult{Deduped: true, ExistingJobID: pending.jobID}, nil
			}
		}
		d, err := loadDedupe(tx, stream)
		if err != nil {
			return nil, EnqueueResult{}, err
		}
		if existing := d.duplicateOf(cmd.Now, cmd.DedupeTTL, cmd.DefaultDedupeTTL); existing != "" {
			return nil, EnqueueResult{Deduped: true, ExistingJobID: existing}, nil
		}
		version := d.version
		if touched {
			version = ledger.AnyVersion // appended to earlier in this decision
		}
		if reserved != nil {
			reserved[stream] = pendingKey{jobID: id}
		}
		evs = append(evs, ledger.NewEvent{Stream: stream, ExpectedVersion: version, Type: events.DedupeReserved,
			Data: events.DedupeReservedData{JobID: id}, Meta: meta})
	}
	evs = append([]ledger.NewEvent{{Stream: events.JobStream(id), ExpectedVersion: 0, Type: events.JobEnqueued, Data: cmd.prepared.encoded, Meta: meta}}, evs...)
	return evs, EnqueueResult{JobID: id}, nil
}

// MaxPayloadDepth is how deeply a job's payload may nest. job.enqueued holds
// it two levels down, well within events.MaxJSONDepth; the tighter bound leaves a
// plugin room to hand the payload back inside its response, which may nest
// 512 levels (pluginhost.MaxResponseDepth) with the payload three down.
const MaxPayloadDepth = 500

// asStored is JSON text as encoding/json embeds a json.RawMessage in the
// event it marshals (compact, HTML characters escaped), which is what
// decoding the stored event gives back; nil when empty (omitted).
func asStored(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	return json.Marshal(raw)
}

// window is the effective dedupe window (spec §3.6).
func (cmd *Enqueue) window() time.Duration {
	if cmd.DedupeTTL > 0 {
		return cmd.DedupeTTL
	}
	return cmd.DefaultDedupeTTL
}

// dedupeState is a dedupe stream folded: which jobs hold the key and how
// they ended.
type dedupeState struct {
	version   int64
	inFlight  []string             // reserved, not yet released, oldest first
	succeeded map[string]time.Time // job → completed_at
	order     []string
}

func loadDedupe(tx *ledger.Tx, stream string) (*dedupeState, error) {
	evs, err := tx.ReadStream(stream)
	if err != nil {
		return nil, err
	}
	d := &dedupeState{succeeded: map[string]time.Time{}}
	// Its version, not its last event's: an archive may have moved its
	// events (ledger archive), and the stream counts on from them.
	if d.version, err = tx.StreamVersion(stream); err != nil {
		return nil, err
	}
	open := map[string]bool{}
	for _, ev := range evs {
		switch ev.Type {
		case events.DedupeReserved:
			var r events.DedupeReservedData
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				return nil, err
			}
			open[r.JobID] = true
			d.order = append(d.order, r.JobID)
		case events.DedupeReleased:
			var r events.DedupeReleasedData
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				return nil, err
			}
			delete(open, r.JobID)
			if r.Status == events.StatusSucceeded {
				at, err := time.Parse(time.RFC3339Nano, r.CompletedAt)
				if err != nil {
					return nil, err
				}
				d.succeeded[r.JobID] = at
			}
		}
	}
	for _, id := range d.order {
		if open[id] {
			d.inFlight = append(d.inFlight, id)
		}
	}
	return d, nil
}

// duplicateOf returns the job that makes a new enqueue a duplicate, or "".
func (d *dedupeState) duplicateOf(now time.Time, override, window time.Duration) string {
	if override > 0 {
		if len(d.inFlight) > 0 {
			return d.inFlight[0]
		}
		window = override
	}
	latest, latestAt := "", time.Time{}
	for id, at := range d.succeeded {
		if now.Sub(at) < window && at.After(latestAt) {
			latest, latestAt = id, at
		}
	}
	return latest
}
