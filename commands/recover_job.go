package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Recover handles a job left running by a process that died (spec §11.2):
// its attempt counts, and it is queued again for the next one, or dead if
// that would exceed max_attempts.
type Recover struct {
	JobID string
	// Reason is why, recorded (default OrphanReason).
	Reason string
	Now    time.Time
	// Pipelines moves the run of a pipeline job that ends here on (nil:
	// found in the ledger; see Pipelines).
	Pipelines *Pipelines
	// SkipLeased leaves a job a remote worker's lease holds as it is:
	// start-up recovery ends only what this daemon's own workers ran.
	SkipLeased bool
	// Fence, when set, recovers the job only if its running attempt is
	// still the one the lease with this fence holds (the sweeper's expiry
	// of a lease it read earlier).
	Fence int64
}

// LeaseExpiredReason is why the sweeper recovers a job whose remote
// worker's lease ran out.
const LeaseExpiredReason = "lease expired"

// OrphanReason is why a job is recovered, unless told otherwise.
const OrphanReason = "the process running it stopped before it finished"

// RecoverResult says what became of an orphan.
type RecoverResult struct {
	Recovered   bool          `json:"recovered"` // false: the job was not running
	Status      events.Status `json:"status"`
	Attempt     int           `json:"attempt"`
	NextAttempt int           `json:"next_attempt"`
}

// RecoverJob recovers one orphan.
func RecoverJob(ctx context.Context, l *ledger.Ledger, cmd Recover) (RecoverResult, error) {
	var res RecoverResult
	_, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		j, err := LoadJob(tx, cmd.JobID)
		if err != nil {
			return nil, err
		}
		var evs []ledger.NewEvent
		evs, res = cmd.decide(j)
		if !res.Status.Terminal() || !res.Recovered {
			return evs, nil
		}
		more, dropped, err := cmd.Pipelines.afterEnd(tx, j, &jobEnd{Status: res.Status, Error: endReason(evs, j.LastError), Now: cmd.Now})
		withDroppedHooks(evs, j.JobID, dropped)
		return append(evs, more...), err
	})
	if err != nil {
		return RecoverResult{}, fmt.Errorf("recover job: %w", err)
	}
	return res, nil
}

// endReason is the reason the job's dead or canceled event among evs
// records (the run's error and a hook's error say why it ended), else
// fallback.
func endReason(evs []ledger.NewEvent, fallback string) string {
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case events.Dead:
			return d.Reason
		case events.Canceled:
			return d.Reason
		}
	}
	return fallback
}

func (cmd Recover) decide(j *Job) ([]ledger.NewEvent, RecoverResult) {
	if j.Status != events.StatusRunning && j.Status != events.StatusCancelRequested {
		return nil, RecoverResult{Status: j.Status, Attempt: j.Attempt}
	}
	lease := j.Leased()
	if (cmd.SkipLeased && lease != nil) || (cmd.Fence != 0 && (lease == nil || lease.Fence != cmd.Fence)) {
		return nil, RecoverResult{Status: j.Status, Attempt: j.Attempt}
	}
	reason := cmd.Reason
	if reason == "" {
		reason = OrphanReason
	}
	if j.Status == events.StatusCancelRequested {
		evs := []ledger.NewEvent{j.next(events.JobCanceled, events.Canceled{Attempt: j.Attempt, Reason: "cancel requested; " + reason, ResultRefs: j.ResultRefs()}, "", events.ActorRecovery)}
		evs = append(evs, releaseKey(j, events.StatusCanceled, cmd.Now, events.ActorRecovery)...)
		return evs, RecoverResult{Recovered: true, Status: events.StatusCanceled, Attempt: j.Attempt, NextAttempt: j.Attempt}
	}
	next := j.Attempt + 1
	requeued := next <= j.MaxAttempts
	evs := []ledger.NewEvent{j.next(events.JobRecovered, events.Recovered{Attempt: j.Attempt, NextAttempt: next, Requeued: requeued, Reason: reason}, "", events.ActorRecovery)}
	res := RecoverResult{Recovered: true, Status: events.StatusQueued, Attempt: j.Attempt, NextAttempt: next}
	if !requeued {
		evs = append(evs, j.next(events.JobDead, events.Dead{Attempt: j.Attempt, Reason: fmt.Sprintf("%s, and it had used all %d attempts", reason, j.MaxAttempts), ResultRefs: j.ResultRefs()}, "", events.ActorRecovery))
		evs = append(evs, releaseKey(j, events.StatusDead, cmd.Now, events.ActorRecovery)...)
		res.Status = events.StatusDead
	}
	return evs, res
}
