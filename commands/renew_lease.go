package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Renew extends the lease a remote worker holds on a job's running attempt
// to Now+Period. Renewals are coalesced: job.lease_renewed is appended
// only when it moves the recorded lease_until on by a third of Period or
// more, so a worker may renew as often as it likes and a long job records
// at most one renewal per Period/3.
type Renew struct {
	JobID string
	Fenced
	Period time.Duration
	Now    time.Time
}

// Renewed is the lease as it holds after a renewal.
type Renewed struct {
	// LeaseUntil is the lease_until recorded: the worker must renew before
	// it (a coalesced renewal leaves the one recorded last).
	LeaseUntil time.Time `json:"lease_until"`
	// Recorded says job.lease_renewed was appended.
	Recorded bool `json:"recorded"`
	// CancelRequested says a cancel was asked for: the worker stops the
	// plugin and completes the attempt (it ends canceled).
	CancelRequested bool `json:"cancel_requested"`
	// DeadlineAt is the attempt's deadline.
	DeadlineAt time.Time `json:"deadline_at"`
}

// RenewLease renews a lease, or, when the fence is stale, records
// job.superseded and returns a *StaleFenceError. A renewal is a relaxed
// append: losing one to a power cut only shortens the lease.
func RenewLease(ctx context.Context, l *ledger.Ledger, cmd Renew) (Renewed, error) {
	if cmd.Period <= 0 {
		return Renewed{}, fmt.Errorf("%w: renew job %s: lease period must be > 0", ErrInvalidCommand, cmd.JobID)
	}
	var res Renewed
	var stale *StaleFenceError
	_, err := l.Decide(ctx, ledger.Relaxed, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		var evs []ledger.NewEvent
		evs, res, stale, err = cmd.decide(j)
		return evs, err
	})
	if err == nil && stale != nil {
		err = stale
	}
	if err != nil {
		return Renewed{}, fmt.Errorf("renew lease: %w", err)
	}
	return res, nil
}

func (cmd Renew) decide(j *Job) ([]ledger.NewEvent, Renewed, *StaleFenceError, error) {
	if superseded, stale := cmd.checkFence(j, events.RefusedRenew, ""); stale != nil {
		return superseded, Renewed{}, stale, nil
	}
	lease := j.Leased()
	recorded, err := time.Parse(time.RFC3339Nano, lease.LeaseUntil)
	if err != nil {
		return nil, Renewed{}, nil, fmt.Errorf("job %s: lease_until: %w", j.JobID, err)
	}
	res := Renewed{LeaseUntil: recorded, CancelRequested: j.Status == events.StatusCancelRequested, DeadlineAt: j.DeadlineAt}
	until := cmd.Now.Add(cmd.Period)
	if until.Sub(recorded) < cmd.Period/3 {
		return nil, res, nil, nil // coalesced: the lease recorded holds for 2/3 of a period or more
	}
	res.LeaseUntil, res.Recorded = until, true
	ev := j.next(events.JobLeaseRenewed, events.LeaseRenewed{Attempt: j.Attempt, Fence: lease.Fence, LeaseUntil: Time(until)}, "", events.ActorWorker)
	return []ledger.NewEvent{ev}, res, nil, nil
}
