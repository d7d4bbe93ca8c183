package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Breaker is the circuit breaker of one plugin's command (spec §5.8) as
// its stream leaves it: every breaker event carries the whole state, so
// the newest one is the breaker.
type Breaker struct {
	Plugin  string
	Command string
	events.BreakerChanged
	Version int64 // the stream's version, for the next append
}

// Healthy reports whether the breaker is closed with no failure counted.
func (b *Breaker) Healthy() bool {
	return b.State == events.BreakerStateClosed && b.Failures == 0
}

// LoadBreaker is the breaker of plugin's command inside a decision (closed
// with no failures when its stream is empty): one read of the stream's
// newest event.
func LoadBreaker(tx *ledger.Tx, plugin, command string) (*Breaker, error) {
	b := &Breaker{Plugin: plugin, Command: command, BreakerChanged: events.BreakerChanged{State: events.BreakerStateClosed}}
	ev, ok, err := tx.LastEvent(events.BreakerStream(plugin, command))
	if err != nil || !ok {
		return b, err
	}
	if err := json.Unmarshal(ev.Data, &b.BreakerChanged); err != nil {
		return nil, fmt.Errorf("fold %s v%d (%s): %w", ev.Stream, ev.Version, ev.Type, err)
	}
	b.Version = ev.Version
	return b, nil
}

// next builds an event that moves the breaker to data, at its stream's
// next version.
func (b *Breaker) next(typ string, data events.BreakerChanged, meta ledger.Meta) ledger.NewEvent {
	data.From = b.State
	ev := ledger.NewEvent{Stream: events.BreakerStream(b.Plugin, b.Command), ExpectedVersion: b.Version, Type: typ, Data: data, Meta: meta}
	b.BreakerChanged, b.Version = data, b.Version+1
	return ev
}

// Admission is the breaker's answer to a scheduled firing.
type Admission struct {
	Allow bool
	// Probe: the firing's job is the half-open probe.
	Probe bool
	// Reason says, for a person, why a firing is refused.
	Reason string
}

// AdmitScheduled decides, inside the scheduler's decision that enqueues
// job jobID of plugin's command, whether the breaker lets it through: a
// closed breaker does; an open one refuses until its probe time, then lets
// this one job through as its probe (the breaker.half_opened event
// returned, to append with the job); a half-open one refuses while its
// probe is queued or running. Disabled settings let everything through.
// The zero settings are the defaults.
func AdmitScheduled(tx *ledger.Tx, plugin, command string, settings config.CircuitBreaker, jobID string, now time.Time) (Admission, []ledger.NewEvent, error) {
	if !settings.OrDefault().Enabled {
		return Admission{Allow: true}, nil, nil
	}
	b, err := LoadBreaker(tx, plugin, command)
	if err != nil {
		return Admission{}, nil, err
	}
	meta := ledger.Meta{CausationID: jobID, Actor: events.ActorScheduler}
	probe := func(reason events.BreakerReason) (Admission, []ledger.NewEvent, error) {
		data := b.BreakerChanged
		data.State, data.Reason, data.ProbeJobID, data.JobID = events.BreakerStateHalfOpen, reason, jobID, ""
		return Admission{Allow: true, Probe: true}, []ledger.NewEvent{b.next(events.BreakerHalfOpened, data, meta)}, nil
	}
	switch b.State {
	case events.BreakerStateOpen:
		probeFrom, err := b.probeFrom()
		if err != nil {
			return Admission{}, nil, fmt.Errorf("breaker %s %s: %w", plugin, command, err)
		}
		if now.Before(probeFrom) {
			return Admission{Reason: b.OpenReason()}, nil, nil
		}
		return probe(events.BreakerReasonCooldownElapsed)
	case events.BreakerStateHalfOpen:
		j, err := LoadJob(tx, b.ProbeJobID)
		switch {
		case errors.Is(err, ErrJobNotFound):
			return probe(events.BreakerReasonProbeEnded) // never enqueued (a duplicate)
		case err != nil:
			return Admission{}, nil, err
		case j.Terminal():
			// Ended without a verdict the completion counts (canceled, or
			// recovered dead): a new probe takes its place.
			return probe(events.BreakerReasonProbeEnded)
		}
		return Admission{Reason: fmt.Sprintf("breaker half-open (open since %s): probe job %s is %s; scheduled firings wait for its outcome",
			b.OpenedAt, b.ProbeJobID, j.Status)}, nil, nil
	}
	return Admission{Allow: true}, nil, nil
}

// MaxProbeTolerance bounds how early before an open breaker's probe time a
// scheduled firing may be its probe (see probeFrom).
const MaxProbeTolerance = time.Minute

// probeFrom is the earliest time a scheduled firing may be an open
// breaker's probe: its probe time less min(MaxProbeTolerance, a tenth of
// the cooldown it opened with). A breaker opens a few milliseconds after
// the firing whose job ended it, so on a schedule whose interval equals
// reset_after the firing at the probe time itself would otherwise be
// refused by those milliseconds, and the probe would wait a whole interval.
func (b *Breaker) probeFrom() (time.Time, error) {
	probeAt, err := time.Parse(time.RFC3339Nano, b.ProbeAt)
	if err != nil {
		return time.Time{}, fmt.Errorf("probe_at %q: %w", b.ProbeAt, err)
	}
	tolerance := MaxProbeTolerance
	if openedAt, err := time.Parse(time.RFC3339Nano, b.OpenedAt); err == nil && probeAt.After(openedAt) {
		tolerance = min(tolerance, probeAt.Sub(openedAt)/10)
	} else {
		tolerance = 0
	}
	return probeAt.Add(-tolerance), nil
}

// OpenReason says why an open breaker refuses scheduled firings.
func (b *Breaker) OpenReason() string {
	last := ""
	if b.LastError != "" {
		last = fmt.Sprintf(" (last: %s)", b.LastError)
	}
	return fmt.Sprintf("breaker open since %s after %d consecutive failures%s; half-open probe at %s",
		b.OpenedAt, b.Failures, last, b.ProbeAt)
}

// breakerEvents are the breaker changes that the end of a scheduled job
// makes, decided with its completion: a job ending dead counts one failure
// (its retries are its own business), and opens the breaker at the
// threshold or when it is the half-open probe; a success closes it and
// clears the count. Jobs made by anyone but the scheduler, jobs waiting for
// a retry and canceled jobs change nothing, and a success of a healthy
// breaker appends nothing.
func breakerEvents(tx *ledger.Tx, j *Job, status events.Status, lastError string, settings config.CircuitBreaker, now time.Time) ([]ledger.NewEvent, error) {
	if j.SubmittedBy != events.ActorScheduler || (status != events.StatusSucceeded && status != events.StatusDead) {
		return nil, nil
	}
	settings = settings.OrDefault()
	if !settings.Enabled {
		return nil, nil
	}
	b, err := LoadBreaker(tx, j.Plugin, j.Command)
	if err != nil {
		return nil, err
	}
	meta := ledger.Meta{CorrelationID: j.Correlation, CausationID: j.JobID, Actor: events.ActorDispatcher}
	data := b.BreakerChanged
	data.JobID, data.Threshold = j.JobID, settings.Threshold
	if status == events.StatusSucceeded {
		if b.Healthy() {
			return nil, nil
		}
		data = events.BreakerChanged{State: events.BreakerStateClosed, Reason: events.BreakerReasonSuccess, JobID: j.JobID, Threshold: settings.Threshold}
		if b.State == events.BreakerStateClosed {
			return []ledger.NewEvent{b.next(events.BreakerFailuresCleared, data, meta)}, nil
		}
		return []ledger.NewEvent{b.next(events.BreakerClosed, data, meta)}, nil
	}
	data.Failures++
	data.LastError = cutError(lastError, 512)
	open := func(reason events.BreakerReason) []ledger.NewEvent {
		data.State, data.Reason, data.ProbeJobID = events.BreakerStateOpen, reason, ""
		data.OpenedAt, data.ProbeAt = Time(now), Time(now.Add(settings.ResetAfter))
		return []ledger.NewEvent{b.next(events.BreakerOpened, data, meta)}
	}
	switch {
	case b.State == events.BreakerStateClosed && data.Failures >= settings.Threshold:
		return open(events.BreakerReasonFailureThreshold), nil
	case b.State == events.BreakerStateHalfOpen && j.JobID == b.ProbeJobID:
		return open(events.BreakerReasonProbeFailed), nil
	}
	// Counted; an open or half-open breaker stays as it is (a job queued
	// before it opened, or beside the probe).
	data.Reason = events.BreakerReasonFailure
	return []ledger.NewEvent{b.next(events.BreakerFailureRecorded, data, meta)}, nil
}

// Reset closes the circuit breaker of a plugin's command by hand
// (ductile system reset) and clears its failure count.
type Reset struct {
	Plugin  string
	Command string
	Actor   events.Actor // events.ActorCLI when empty
	Now     time.Time
}

// ResetResult says what the reset found and did.
type ResetResult struct {
	Before Breaker // the breaker as the reset found it
	// Reset is false when it was closed with no failures: nothing to do.
	Reset bool
	Seq   int64
}

// ResetBreaker appends breaker.reset unless the breaker is closed with no
// failure counted, which it leaves alone.
func ResetBreaker(ctx context.Context, l *ledger.Ledger, cmd Reset) (ResetResult, error) {
	var res ResetResult
	seqs, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		b, err := LoadBreaker(tx, cmd.Plugin, cmd.Command)
		if err != nil {
			return nil, err
		}
		var evs []ledger.NewEvent
		res, evs = cmd.decide(b)
		return evs, nil
	})
	if err != nil {
		return ResetResult{}, fmt.Errorf("reset breaker: %w", err)
	}
	if len(seqs) > 0 {
		res.Seq = seqs[0]
	}
	return res, nil
}

func (cmd Reset) decide(b *Breaker) (ResetResult, []ledger.NewEvent) {
	res := ResetResult{Before: *b}
	if b.Healthy() {
		return res, nil
	}
	actor := cmd.Actor
	if actor == "" {
		actor = events.ActorCLI
	}
	res.Reset = true
	data := events.BreakerChanged{State: events.BreakerStateClosed, Reason: events.BreakerReasonManualReset, Threshold: b.Threshold}
	return res, []ledger.NewEvent{b.next(events.BreakerReset, data, ledger.Meta{Actor: actor})}
}
