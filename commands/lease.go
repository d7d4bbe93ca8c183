package commands

import (
	"errors"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// ErrStaleFence means a remote worker sent something for a job with a
// fence that is no longer current: its lease ran out, or the job was
// claimed again, completed or canceled since. What it sent is recorded as
// job.superseded and never applied.
var ErrStaleFence = errors.New("stale fence")

// StaleFenceError says which fence a worker sent for a job and what holds
// the job now.
type StaleFenceError struct {
	JobID   string
	Refused string // what was refused: events.RefusedComplete, RefusedRenew, RefusedLog
	Fence   int64  // the fence sent
	Current int64  // the job's current fence (0: no lease holds it)
	Status  events.Status
	// Holder is the lease's worker when the fence sent is current but
	// another worker sent it ("" otherwise).
	Holder string
}

func (e *StaleFenceError) Error() string {
	if e.Holder != "" {
		return fmt.Sprintf("job %s: fence %d is held by worker %s, not the worker that sent it: the %s was recorded as superseded and not applied; drop the job",
			e.JobID, e.Fence, e.Holder, e.Refused)
	}
	if e.Current > 0 {
		return fmt.Sprintf("job %s: fence %d is stale (the job is %s under fence %d): the %s was recorded as superseded and not applied; drop the job",
			e.JobID, e.Fence, e.Status, e.Current, e.Refused)
	}
	return fmt.Sprintf("job %s: fence %d is stale (the job is %s and no lease holds it): the %s was recorded as superseded and not applied; drop the job",
		e.JobID, e.Fence, e.Status, e.Refused)
}

func (e *StaleFenceError) Unwrap() error { return ErrStaleFence }

// Fenced is what a remote worker sends with a job: who it is, the attempt
// and the fence of its lease.
type Fenced struct {
	Worker  string
	Attempt int
	Fence   int64
}

// checkFence returns nil if f's fence is the one of the lease that holds
// j's running attempt, and f's worker the lease's, else the
// job.superseded that records what was refused and the error to answer.
// (A fence is a stream version: another worker could guess it.)
func (f Fenced) checkFence(j *Job, refused string, kind events.Outcome) ([]ledger.NewEvent, *StaleFenceError) {
	lease := j.Leased()
	if lease != nil && lease.Fence == f.Fence && f.Fence > 0 && lease.Worker == f.Worker {
		return nil, nil
	}
	stale := &StaleFenceError{JobID: j.JobID, Refused: refused, Fence: f.Fence, Status: j.Status}
	if lease != nil {
		stale.Current = lease.Fence
		if lease.Fence == f.Fence {
			stale.Holder = lease.Worker
		}
	}
	ev := j.next(events.JobSuperseded, events.Superseded{Refused: refused, Worker: f.Worker, Attempt: f.Attempt, Fence: f.Fence,
		CurrentFence: stale.Current, Status: j.Status, Kind: kind}, "", events.ActorWorker)
	return []ledger.NewEvent{ev}, stale
}

// CheckFence reports whether f's fence holds j's running attempt now: nil
// if it does, else a *StaleFenceError (refused, nothing recorded): for
// what a worker reports that is not decided on the job's stream
// (progress, export items, which the run report records).
func (f Fenced) CheckFence(j *Job, refused string) error {
	if _, stale := f.checkFence(j, refused, ""); stale != nil {
		return stale
	}
	return nil
}

// leaseFor is the lease a claim by worker records on the job.started it
// appends to j (whose version is that of the stream before it): its fence
// is the version the job.started gets, so it only grows per job.
func leaseFor(j *Job, worker string, period time.Duration, now time.Time) *events.Lease {
	return &events.Lease{Worker: worker, Fence: j.Version + 1, LeaseUntil: Time(now.Add(period))}
}
