package engine

import (
	"context"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Cancel asks for a job to stop: a queued one is canceled at once, a
// running one gets a cancel request its runner acts on.
type Cancel struct {
	// Job is a job id, its short id, or a unique prefix of either
	// (views.ResolveJobID's errors if not).
	Job    string
	Reason string
	By     events.Actor // who asked
	DryRun bool         // read the job, append nothing
	Now    time.Time
}

// Canceled is what a cancel did.
type Canceled struct {
	JobID  string
	Before events.Status // the job's status when it was read
	// Status is the job's status now: canceled, or cancel_requested for a
	// running job; Before on a dry run.
	Status events.Status
}

// Cancel cancels a job (commands.CancelJob: a *commands.TransitionError for
// a job that is finished). A pipeline job's cancel moves its run on with the
// Engine's one pipeline runtime.
func (e *Engine) Cancel(ctx context.Context, req Cancel) (Canceled, error) {
	id, j, err := e.job(ctx, req.Job)
	if err != nil {
		return Canceled{JobID: id}, err
	}
	out := Canceled{JobID: id, Before: j.Status, Status: j.Status}
	if req.DryRun {
		return out, nil
	}
	out.Status, err = commands.CancelJob(ctx, e.ledger, commands.Cancel{JobID: id, Reason: req.Reason, Actor: req.By, Now: now(req.Now),
		Pipelines: e.pipelines})
	return out, err
}
