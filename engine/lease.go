package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/views"
)

// Renew renews the lease worker holds on job id's running attempt (f:
// worker, attempt, fence), coalesced (at most one job.lease_renewed per
// lease period/3: commands.Renew). The answer says until when the lease
// holds and whether a cancel was asked for (the worker then stops its
// plugin's process group and completes the attempt, which ends canceled).
// A stale fence is a *StaleFenceError (recorded as job.superseded).
func (e *Engine) Renew(ctx context.Context, id string, f commands.Fenced) (commands.Renewed, error) {
	r, err := commands.RenewLease(ctx, e.ledger, commands.Renew{JobID: id, Fenced: f, Period: e.fleet.leasePeriod, Now: e.fleet.Now()})
	return r, staleFence(err)
}

// CompleteRemote records how an attempt a remote worker ran under fence
// ended, through the same path as a local completion (Complete: outcome,
// facts, routing, pipelines, circuit breaker), provided the fence still
// holds the job; else nothing is applied, job.superseded is recorded and
// a *StaleFenceError returned. A job completes once: of two completions
// racing, the second finds the job moved on and is superseded.
func (e *Engine) CompleteRemote(ctx context.Context, fence int64, a Attempt) (Completion, error) {
	if fence <= 0 {
		return Completion{}, fmt.Errorf("%w: complete job %s: a remote completion needs the fence its claim gave", commands.ErrInvalidCommand, a.JobID)
	}
	a.Fence, a.Local = fence, nil
	if a.EndedAt.IsZero() {
		a.EndedAt = e.fleet.Now()
	}
	e.fleet.closeReport(ctx, a.JobID) // its last progress lands before the end
	c, err := e.Complete(ctx, a)
	if err == nil || errors.Is(err, commands.ErrStaleFence) || errors.Is(err, commands.ErrInvalidTransition) {
		e.fleet.ended(a.JobID) // the lease holds the job no more (a stale one may have held it: the sweep reads them again)
	}
	return c, err
}

// Failure is how a remote worker reports an attempt that failed without a
// plugin response (it could not start the plugin, or lost it).
type Failure struct {
	JobID     string         `json:"job_id"`
	Worker    events.Worker  `json:"worker"`
	Attempt   int            `json:"attempt"`
	Fence     int64          `json:"fence"`
	Kind      events.Outcome `json:"kind,omitempty"` // default events.OutcomeError
	Error     string         `json:"error"`
	Retryable bool           `json:"retryable,omitempty"`
	ExitCode  int            `json:"exit_code"`
	Duration  time.Duration  `json:"duration_ns"`
}

// Fail records a remote attempt's failure: CompleteRemote with its
// outcome, so the job's retry policy decides what follows.
func (e *Engine) Fail(ctx context.Context, f Failure) (Completion, error) {
	kind := f.Kind
	if kind == "" {
		kind = events.OutcomeError
	}
	if kind == events.OutcomeOK {
		return Completion{}, fmt.Errorf("%w: fail job %s: the outcome of a failure cannot be ok", commands.ErrInvalidCommand, f.JobID)
	}
	return e.CompleteRemote(ctx, f.Fence, Attempt{JobID: f.JobID, Attempt: f.Attempt, Worker: f.Worker, Kind: kind, Retryable: f.Retryable,
		Error: f.Error, ExitCode: f.ExitCode, Duration: f.Duration})
}

// RecordRemoteStderr records a log batch a remote worker streamed for its
// attempt under f's fence (job.stderr_written); a stale fence is a
// *StaleFenceError, recorded as job.superseded.
func (e *Engine) RecordRemoteStderr(ctx context.Context, f commands.Fenced, lines commands.StderrLines) error {
	lines.Fence, lines.Attempt = &f, f.Attempt
	return staleFence(commands.RecordStderr(ctx, e.ledger, lines))
}

// RemoteReport is the run report (Report) of the attempt a remote worker
// holds under f, for the progress and export items it streams: one per
// attempt across requests, kept by the Fleet and closed (its last progress
// flushed) by the attempt's CompleteRemote or expiry, or Fleet.Close. A
// fence that does not hold the job now is a *StaleFenceError (read, not
// recorded).
func (e *Engine) RemoteReport(ctx context.Context, id string, f commands.Fenced) (*RunReport, error) {
	j, err := views.JobState(ctx, e.ledger, id)
	if err != nil {
		return nil, fmt.Errorf("report on job %s: %w", id, err)
	}
	if err := f.CheckFence(j, "report"); err != nil {
		return nil, staleFence(err)
	}
	return e.fleet.report(ctx, id, f.Fence, func() *RunReport { return e.Report(id, f.Attempt) }), nil
}

// Lease is a remote worker's lease on a running job, as the ledger holds
// it now.
type Lease struct {
	JobID      string    `json:"job_id"`
	Plugin     string    `json:"plugin"`
	Attempt    int       `json:"attempt"`
	Worker     string    `json:"worker"`
	Fence      int64     `json:"fence"`
	LeaseUntil time.Time `json:"lease_until"`
	DeadlineAt time.Time `json:"deadline_at"`
}

// Leases are the leases that hold running jobs now: every running job's
// stream is read (the running jobs are few: the workers' slots).
func (e *Engine) Leases(ctx context.Context) ([]Lease, error) {
	var ids []string
	err := e.ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ListActiveJobs(conn, func(r queries.ListActiveJobsRow) error {
			ids = append(ids, r.ID)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	var out []Lease
	for _, id := range ids {
		evs, err := e.ledger.ReadStream(ctx, events.JobStream(id))
		if err != nil {
			return nil, fmt.Errorf("list leases: %w", err)
		}
		j, err := commands.FoldJob(evs)
		if err != nil {
			return nil, fmt.Errorf("list leases: %w", err)
		}
		l := j.Leased()
		if l == nil {
			continue
		}
		until, err := time.Parse(time.RFC3339Nano, l.LeaseUntil)
		if err != nil {
			return nil, fmt.Errorf("list leases: job %s: lease_until: %w", id, err)
		}
		out = append(out, Lease{JobID: id, Plugin: j.Plugin, Attempt: j.Attempt, Worker: l.Worker, Fence: l.Fence, LeaseUntil: until, DeadlineAt: j.DeadlineAt})
	}
	return out, nil
}

// Sweep ends the remote attempts whose lease ran out (as lost:
// job.recovered with reason "lease expired", and the retry policy decides,
// as for a local crash) or whose deadline passed (timed out, through
// Complete), as of the Fleet's clock. It returns when it should run next:
// the earliest lease_until or deadline_at still ahead (zero: no lease).
func (e *Engine) Sweep(ctx context.Context, log *slog.Logger) (time.Time, error) {
	leases, err := e.Leases(ctx)
	if err != nil {
		return time.Time{}, err
	}
	e.fleet.swept(leases)
	now := e.fleet.Now()
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	var errs []error
	for _, l := range leases {
		switch {
		case !l.DeadlineAt.IsZero() && !now.Before(l.DeadlineAt):
			if err := e.timeOut(ctx, l, now); err != nil {
				errs = append(errs, err)
				continue
			}
			e.fleet.ended(l.JobID)
			log.Warn("a remote attempt passed its deadline: timed out", "job_id", l.JobID, "worker", l.Worker, "attempt", l.Attempt, "fence", l.Fence)
		case !now.Before(l.LeaseUntil) && now.Before(e.fleet.graceUntil()):
			later(e.fleet.graceUntil()) // the daemon has just started: the worker may still renew
			if !l.DeadlineAt.IsZero() {
				later(l.DeadlineAt)
			}
		case !now.Before(l.LeaseUntil):
			res, err := commands.RecoverJob(ctx, e.ledger, commands.Recover{JobID: l.JobID, Fence: l.Fence, Reason: commands.LeaseExpiredReason,
				Now: now, Pipelines: e.pipelines})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			e.fleet.ended(l.JobID)
			e.fleet.closeReport(ctx, l.JobID)
			if res.Recovered {
				log.Warn("a remote worker's lease expired: the attempt is lost", "job_id", l.JobID, "worker", l.Worker,
					"attempt", res.Attempt, "status", res.Status, "next_attempt", res.NextAttempt)
			}
		default:
			later(l.LeaseUntil)
			if !l.DeadlineAt.IsZero() {
				later(l.DeadlineAt)
			}
		}
	}
	return next, errors.Join(errs...)
}

// timeOut ends lease l's attempt as timed out (the worker did not report
// within the deadline): a timeout is retryable, as the local runner's is.
func (e *Engine) timeOut(ctx context.Context, l Lease, now time.Time) error {
	e.fleet.closeReport(ctx, l.JobID)
	_, err := e.Complete(ctx, Attempt{JobID: l.JobID, Attempt: l.Attempt, Worker: events.Worker{Name: l.Worker}, Kind: events.OutcomeTimeout,
		Retryable: true, ExitCode: -1, Error: fmt.Sprintf("the remote attempt passed its deadline (%s) without completing", commands.Time(l.DeadlineAt)),
		EndedAt: now, Fence: l.Fence})
	if errors.Is(err, commands.ErrStaleFence) {
		return nil // it ended meanwhile
	}
	return err
}
