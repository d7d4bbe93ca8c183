package views

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// RunKindPlugin is the kind of a run that is a job of a plugin command.
const RunKindPlugin = "plugin"

// RunRecord is a run as the Run protocol shows it (spec run-protocol.md
// §5.1): a job (run_id = job id), folded from its stream. Times are epoch
// seconds; a field the run has no value for is null.
type RunRecord struct {
	RunID    string    `json:"run_id"`
	Kind     string    `json:"kind"` // RunKindPlugin
	PluginID string    `json:"plugin_id"`
	EntryID  string    `json:"entry_id"` // the plugin's command
	Status   RunStatus `json:"status"`

	CreatedAt  float64  `json:"created_at"`
	UpdatedAt  float64  `json:"updated_at"`
	StartedAt  *float64 `json:"started_at"`  // the first attempt's start
	FinishedAt *float64 `json:"finished_at"` // once terminal

	TaskID         *string `json:"task_id"`
	TraceID        *string `json:"trace_id"`
	IdempotencyKey *string `json:"idempotency_key"`
	// RootRunID is the first run of the retry chain (the run itself if it
	// is the first), ParentRunID the run this one retries, Attempt its
	// place in the chain, from 1.
	RootRunID   string  `json:"root_run_id"`
	ParentRunID *string `json:"parent_run_id"`
	Attempt     int     `json:"attempt"`

	// Progress, Stage and Message are the running (or last) attempt's last
	// reported progress.
	Progress *float64 `json:"progress"`
	Stage    *string  `json:"stage"`
	Message  *string  `json:"message"`

	CancelRequested   bool     `json:"cancel_requested"`
	CancelReason      *string  `json:"cancel_reason"`
	CancelRequestedAt *float64 `json:"cancel_requested_at"`

	// Error is why a run that did not succeed ended (null otherwise).
	Error *RunError `json:"error"`
	// ResultRefs are the export items of the run's final result set: the
	// items of the attempt that ended it, committed with the terminal
	// event; empty until then.
	ResultRefs []string `json:"result_refs"`
	// Attempts are the job's automatic attempts, oldest first.
	Attempts     []RunAttempt `json:"attempts"`
	ExportsCount int          `json:"exports_count"`
	// Seq is the seq of the newest event of the run the record folds.
	Seq int64 `json:"seq"`
}

// RunError is a run's or an attempt's error (spec §9).
type RunError struct {
	Code    RunErrorCode    `json:"code"`
	Message string          `json:"message"`
	Details RunErrorDetails `json:"details"`
}

// RunErrorDetails say which attempt failed and how.
type RunErrorDetails struct {
	Attempt   int            `json:"attempt,omitempty"`
	ExitCode  *int           `json:"exit_code,omitempty"`
	Kind      events.Outcome `json:"kind,omitempty"`
	Retryable bool           `json:"retryable"`
}

// RunAttempt is one automatic attempt of a run's job.
type RunAttempt struct {
	Attempt    int       `json:"attempt"`
	Status     string    `json:"status"` // running | succeeded | failed | timeout | canceled | lost
	StartedAt  float64   `json:"started_at"`
	FinishedAt *float64  `json:"finished_at"`
	ExitCode   *int      `json:"exit_code"`
	Error      *RunError `json:"error"`
	// Worker is who ran the attempt (its job.started's worker: a remote
	// worker's name, or "<host>/local" for the daemon's own, with its
	// process id); null in attempts recorded before workers were named.
	Worker *events.Worker `json:"worker"`
}

// The statuses of an attempt (RunAttempt.Status).
const (
	AttemptRunning   = "running"
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
	AttemptTimeout   = "timeout"
	AttemptCanceled  = "canceled"
	AttemptLost      = "lost"
)

// ReadRunRecord reads run id (a job id) from its job's stream, the source
// of truth. No such job is a *JobNotFoundError.
func ReadRunRecord(ctx context.Context, l *ledger.Ledger, id string) (RunRecord, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return RunRecord{}, err
	}
	if len(evs) == 0 {
		return RunRecord{}, &JobNotFoundError{ID: id}
	}
	return FoldRunRecord(evs)
}

// ReadRunRecordAt reads run id as it was at seq (time travel): folded from
// its events up to seq. A seq before the run was created is a
// *JobNotFoundError.
func ReadRunRecordAt(ctx context.Context, l *ledger.Ledger, id string, seq int64) (RunRecord, error) {
	evs, err := readStreamThrough(ctx, l, id, seq)
	if err != nil {
		return RunRecord{}, err
	}
	if len(evs) == 0 {
		return RunRecord{}, &JobNotFoundError{ID: id}
	}
	return FoldRunRecord(evs)
}

// FoldRunRecord folds a job's events, oldest first, into its run record.
func FoldRunRecord(evs []ledger.Event) (RunRecord, error) {
	f := runFold{r: RunRecord{Kind: RunKindPlugin, ResultRefs: []string{}, Attempts: []RunAttempt{}}}
	for _, ev := range evs {
		if err := f.apply(ev); err != nil {
			return RunRecord{}, fmt.Errorf("fold run %s v%d (%s): %w", ev.Stream, ev.Version, ev.Type, err)
		}
	}
	return f.r, nil
}

// runFold is a run record being folded.
type runFold struct {
	r        RunRecord
	status   events.Status
	timedOut bool      // the last attempt that ended timed out
	lastErr  *RunError // the last attempt's error
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func ptr[T any](v T) *T { return &v }

func (f *runFold) attempt(n int) *RunAttempt {
	for i := len(f.r.Attempts) - 1; i >= 0; i-- {
		if f.r.Attempts[i].Attempt == n {
			return &f.r.Attempts[i]
		}
	}
	return nil
}

func (f *runFold) apply(ev ledger.Event) error {
	at := epoch(ev.RecordedAt)
	r := &f.r
	r.UpdatedAt, r.Seq = at, ev.Seq
	switch ev.Type {
	case events.JobEnqueued:
		var d events.Enqueued
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		r.RunID, r.PluginID, r.EntryID, r.CreatedAt = d.JobID, d.Plugin, d.Command, at
		r.TaskID, r.TraceID, r.IdempotencyKey = optional(d.TaskID), optional(d.TraceID), optional(d.IdempotencyKey)
		r.RootRunID, r.ParentRunID, r.Attempt = cmp.Or(d.RootJobID, d.JobID), optional(d.RetryOf), max(d.RunAttempt, 1)
		f.status = events.StatusQueued
	case events.JobStarted:
		var d events.Started
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		if r.StartedAt == nil {
			r.StartedAt = ptr(at)
		}
		r.Attempts = append(r.Attempts, RunAttempt{Attempt: d.Attempt, Status: AttemptRunning, StartedAt: at, Worker: d.Worker})
		r.Progress, r.Stage, r.Message = nil, nil, nil
		f.status = events.StatusRunning
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
		var d events.AttemptEnded
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		f.ended(ev.Type, d, at)
		if ev.Type == events.JobSucceeded {
			f.status = events.StatusSucceeded
			f.finished(at, d.ResultRefs)
		}
	case events.JobRetryScheduled:
		f.status = events.StatusQueued
	case events.JobRecovered:
		var d events.Recovered
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		e := &RunError{Code: RunErrorLost, Message: d.Reason, Details: RunErrorDetails{Attempt: d.Attempt, Retryable: d.Requeued}}
		if a := f.attempt(d.Attempt); a != nil {
			a.Status, a.FinishedAt, a.Error = AttemptLost, ptr(at), e
		}
		f.lastErr, f.timedOut = e, false
		if d.Requeued {
			f.status = events.StatusQueued
		}
	case events.JobDead:
		var d events.Dead
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		f.status = events.StatusDead
		switch {
		case f.lastErr == nil:
			// Dead before any attempt ran (refused at once).
			f.lastErr = &RunError{Code: RunErrorValidation, Message: d.Reason, Details: RunErrorDetails{Attempt: d.Attempt}}
		case f.lastErr.Code != RunErrorLost:
			e := *f.lastErr
			e.Message = d.Reason
			f.lastErr = &e
		}
		r.Error = f.lastErr
		f.finished(at, d.ResultRefs)
	case events.JobCancelRequested:
		var d events.Canceled
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		r.CancelRequested, r.CancelReason, r.CancelRequestedAt = true, optional(d.Reason), ptr(at)
		f.status = events.StatusCancelRequested
	case events.JobCanceled:
		var d events.Canceled
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		if !r.CancelRequested {
			r.CancelRequested, r.CancelReason, r.CancelRequestedAt = true, optional(d.Reason), ptr(at)
		}
		if a := f.attempt(d.Attempt); a != nil && a.FinishedAt == nil {
			a.Status, a.FinishedAt = AttemptCanceled, ptr(at)
		}
		f.status = events.StatusCanceled
		r.Error = &RunError{Code: RunErrorCanceled, Message: cmp.Or(d.Reason, "canceled"), Details: RunErrorDetails{Attempt: d.Attempt}}
		f.finished(at, d.ResultRefs)
	case events.JobProgressed:
		var d events.Progressed
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return err
		}
		r.Progress, r.Stage, r.Message = d.Progress, optional(d.Stage), optional(d.Message)
	case events.JobExported:
		r.ExportsCount++
	case events.JobStderrWritten, events.JobRetried, events.JobReplayed, events.JobLeaseRenewed, events.JobSuperseded:
	default:
		return fmt.Errorf("unknown job event type %q", ev.Type)
	}
	r.Status = RunStatusOf(f.status, f.timedOut)
	return nil
}

// ended records the end of an attempt.
func (f *runFold) ended(typ string, d events.AttemptEnded, at float64) {
	a := f.attempt(d.Attempt)
	if a == nil {
		f.r.Attempts = append(f.r.Attempts, RunAttempt{Attempt: d.Attempt, StartedAt: at})
		a = &f.r.Attempts[len(f.r.Attempts)-1]
	}
	a.FinishedAt, a.ExitCode = ptr(at), ptr(d.ExitCode)
	f.timedOut = typ == events.JobTimedOut
	switch {
	case typ == events.JobSucceeded:
		a.Status, f.lastErr = AttemptSucceeded, nil
		return
	case f.timedOut:
		a.Status = AttemptTimeout
	case d.Kind == events.OutcomeCanceled:
		a.Status = AttemptCanceled
	default:
		a.Status = AttemptFailed
	}
	kind := d.Kind
	if f.timedOut {
		kind = events.OutcomeTimeout
	}
	a.Error = &RunError{Code: errorCodeOf(kind), Message: d.Error,
		Details: RunErrorDetails{Attempt: d.Attempt, ExitCode: ptr(d.ExitCode), Kind: kind, Retryable: d.Retryable}}
	f.lastErr = a.Error
}

// finished ends the run with its result set.
func (f *runFold) finished(at float64, refs []string) {
	f.r.FinishedAt = ptr(at)
	if refs != nil {
		f.r.ResultRefs = refs
	}
}

// readStreamThrough is job id's events up to seq.
func readStreamThrough(ctx context.Context, l *ledger.Ledger, id string, seq int64) (evs []ledger.Event, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		evs, err = ledger.ReadStreamThrough(conn, events.JobStream(id), seq)
		return err
	})
	return evs, err
}
