package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// Redo asks for a job to run again as a new job linked to it: a retry of a
// dead or canceled job (once), or a replay of a finished one (any number of
// times).
type Redo struct {
	// Job is a job id, its short id, or a unique prefix of either
	// (views.ResolveJobID's errors if not).
	Job string
	By  events.Actor // who asked: the new job's submitted_by
	// Check refuses, before anything is appended, a job that cannot be
	// redone (commands.CanRetry, commands.CanReplay) and one whose plugin
	// command the Engine cannot run (a *commands.TargetError): as the CLI
	// asks. Without it the command's own refusal stands.
	Check bool
	// DryRun checks (with Check) and appends nothing.
	DryRun bool
	Now    time.Time
}

// Retried is what a retry did: the new job, or the job whose dedupe key
// made it a duplicate.
type Retried struct {
	commands.RetryResult
	// Old is the job retried as last read; on a refusal (not dead or
	// canceled, retried already) as it is now. Nil if it could not be read.
	Old *commands.Job
}

// Replayed is what a replay did: the new job.
type Replayed struct {
	commands.ReplayResult
	// Old is the job replayed as last read; on a refusal (not finished) as
	// it is now. Nil if it could not be read.
	Old *commands.Job
}

// Retry enqueues a dead or canceled job again as a new job linked to it,
// with the attempt budget the config gives its plugin now (Defaults).
func (e *Engine) Retry(ctx context.Context, req Redo) (Retried, error) {
	old, err := e.redo(ctx, req, commands.CanRetry)
	out := Retried{Old: old}
	if err != nil || req.DryRun {
		return out, err
	}
	d := e.Defaults(old.Plugin, old.Command, req.By)
	out.RetryResult, err = commands.RetryJob(ctx, e.ledger, commands.Retry{JobID: old.JobID, Actor: req.By,
		MaxAttempts: d.MaxAttempts, BackoffBase: d.BackoffBase, DefaultDedupeTTL: d.DefaultDedupeTTL, Now: now(req.Now)})
	if errors.Is(err, commands.ErrInvalidTransition) || errors.Is(err, commands.ErrAlreadyRetried) {
		out.Old = e.reread(ctx, old.JobID) // changed since it was read: say what it is now
	}
	return out, err
}

// Replay enqueues a finished job's step again as a new job linked to it,
// with the attempt budget the config gives its plugin now (Defaults): that
// one step, no pipeline step follows it.
func (e *Engine) Replay(ctx context.Context, req Redo) (Replayed, error) {
	old, err := e.redo(ctx, req, commands.CanReplay)
	out := Replayed{Old: old}
	if err != nil || req.DryRun {
		return out, err
	}
	d := e.Defaults(old.Plugin, old.Command, req.By)
	out.ReplayResult, err = commands.ReplayJob(ctx, e.ledger, commands.Replay{JobID: old.JobID, Actor: req.By,
		MaxAttempts: d.MaxAttempts, BackoffBase: d.BackoffBase, Now: now(req.Now)})
	if errors.Is(err, commands.ErrInvalidTransition) {
		out.Old = e.reread(ctx, old.JobID)
	}
	return out, err
}

// Defaults is an enqueue of plugin's command by by with the config's retry
// and dedupe defaults (commands.JobFor): the one place a new job, a retry
// and a replay take them from.
func (e *Engine) Defaults(plugin, command string, by events.Actor) commands.Enqueue {
	return commands.JobFor(e.config, plugin, command, by)
}

// redo reads the job req names and, with Check, refuses what can refuse it.
func (e *Engine) redo(ctx context.Context, req Redo, can func(*commands.Job) error) (*commands.Job, error) {
	_, j, err := e.job(ctx, req.Job)
	if err != nil {
		return nil, err
	}
	if !req.Check {
		return j, nil
	}
	if err := can(j); err != nil {
		return j, err
	}
	_, _, err = e.Target(j.Plugin, j.Command)
	return j, err
}

// reread is job id as it folds now, or nil.
func (e *Engine) reread(ctx context.Context, id string) *commands.Job {
	j, err := views.JobState(ctx, e.ledger, id)
	if err != nil {
		return nil
	}
	return j
}

// now is t, or the time now when t is zero.
func now(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// job resolves ref (a job id, short id or unique prefix) on the Engine's
// ledger and reads the job's state: its id once resolved, with an error
// after that.
func (e *Engine) job(ctx context.Context, ref string) (string, *commands.Job, error) {
	if e.ledger == nil {
		return "", nil, fmt.Errorf("job %s: no ledger is open", ref)
	}
	id, err := views.ResolveJobID(ctx, e.ledger, ref)
	if err != nil {
		return "", nil, err
	}
	j, err := views.JobState(ctx, e.ledger, id)
	return id, j, err
}
