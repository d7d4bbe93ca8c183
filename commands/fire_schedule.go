package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/schedule"
)

// FireSchedule records what a schedule's plan does at one instant: the
// firings catch_up does not run (schedule.skipped) and, for each firing to
// run, schedule.fired with its job's job.enqueued (and the cancels of
// if_running: cancel), or schedule.skipped with the reason it did not.
type FireSchedule struct {
	Schedule schedule.Schedule
	// Version is the version of the schedule's stream the plan was made
	// from: if the stream has moved, someone else recorded firings since,
	// and the decision is refused (a *ledger.VersionConflictError).
	Version int64
	// Plan is Schedule.Plan at Now: its Skip and Fire are recorded.
	Plan schedule.Plan
	// Job is the job each firing enqueues, with the retry and dedupe
	// defaults of JobFor; Plugin, Command, Payload, Event, SubmittedBy
	// (events.ActorScheduler), JobID and Now are set per firing.
	Job Enqueue
	// Polls are the plugin's poll jobs queued or running as the job_queue
	// projection showed them just before (the poll guard's candidates): the
	// decision keeps those its stream still shows queued or running.
	Polls []string
	// Admit is the circuit breaker's hook; nil admits every firing.
	Admit Admit
	Now   time.Time
}

// Admit decides, inside the firing's transaction, whether a firing that
// would enqueue jobID for plugin's command may; evs are appended with the
// firing either way (a breaker's own transitions). A refused firing is
// recorded as schedule.skipped with reason.
type Admit func(tx *ledger.Tx, plugin, command, jobID string, now time.Time) (allow bool, reason string, evs []ledger.NewEvent, err error)

// FireResult says what a FireSchedule recorded.
type FireResult struct {
	// Version is the schedule stream's version once recorded, and Last the
	// Slot of its newest event (nil when nothing was recorded).
	Version int64
	Last    *schedule.Slot
	Fired   []events.ScheduleFiredData
	Skipped []events.ScheduleSkippedData
}

// FireScheduleJobs records a schedule's plan in one decision.
func FireScheduleJobs(ctx context.Context, l *ledger.Ledger, cmd FireSchedule) (FireResult, error) {
	jobs := make([]Enqueue, len(cmd.Plan.Fire))
	for i, f := range cmd.Plan.Fire {
		job, err := cmd.job(f)
		if err != nil {
			return FireResult{}, fmt.Errorf("fire schedule %s: %w", cmd.Schedule.Stream(), err)
		}
		jobs[i] = job
	}
	var res FireResult
	_, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		var evs []ledger.NewEvent
		var err error
		evs, res, err = cmd.decide(tx, jobs)
		return evs, err
	})
	if err != nil {
		return FireResult{}, fmt.Errorf("fire schedule %s: %w", cmd.Schedule.Stream(), err)
	}
	return res, nil
}

// job is the Enqueue of firing f, prepared (its id assigned) outside the
// transaction.
func (cmd FireSchedule) job(f schedule.Firing) (Enqueue, error) {
	s := cmd.Schedule
	job := cmd.Job
	job.prepared = nil
	job.JobID, job.Plugin, job.Command, job.SubmittedBy, job.Now = "", s.Plugin, s.Entry.Command, events.ActorScheduler, cmd.Now
	payload := json.RawMessage(`{}`)
	if s.Entry.Payload != nil {
		var err error
		if payload, err = json.Marshal(s.Entry.Payload); err != nil {
			return Enqueue{}, fmt.Errorf("%w: payload: %v", ErrInvalidCommand, err)
		}
	}
	job.Payload = payload
	if err := job.prepare(); err != nil { // assigns the id the envelope names
		return Enqueue{}, err
	}
	// The envelope's timestamp is the firing's nominal time, so that each
	// job of a run_all catch-up knows which period it covers.
	event, err := json.Marshal(events.Envelope{
		Type: "ductile." + string(events.ActorScheduler), Payload: job.Payload, EventID: job.JobID,
		Source: s.Stream(), Timestamp: Time(f.Nominal),
	})
	if err != nil {
		return Enqueue{}, err
	}
	job.Event, job.prepared = event, nil
	return job, job.prepare()
}

func (cmd FireSchedule) decide(tx *ledger.Tx, jobs []Enqueue) ([]ledger.NewEvent, FireResult, error) {
	s := cmd.Schedule
	stream := s.Stream()
	last, found, err := tx.LastEvent(stream)
	if err != nil {
		return nil, FireResult{}, err
	}
	if last.Version != cmd.Version {
		return nil, FireResult{}, &ledger.VersionConflictError{Stream: stream, Expected: cmd.Version, Actual: last.Version}
	}
	open, err := lastOpen(last, found)
	if err != nil {
		return nil, FireResult{}, err
	}

	// What is outstanding: the entry's open jobs and the poll guard's
	// candidates, as their streams show them now.
	loaded := map[string]*Job{}
	outstanding := func(ids []string) ([]schedule.Job, error) {
		var out []schedule.Job
		for _, id := range ids {
			j, ok := loaded[id]
			if !ok {
				var err error
				j, err = LoadJob(tx, id)
				if errors.Is(err, ErrJobNotFound) {
					// An archive moved it (ledger archive moves only
					// finished jobs) after the schedule's newest event,
					// carried over, named it open.
					continue
				}
				if err != nil {
					return nil, err
				}
				loaded[id] = j
			}
			switch j.Status {
			case events.StatusQueued, events.StatusRunning:
				out = append(out, schedule.Job{ID: id, Running: j.Status == events.StatusRunning})
			}
		}
		return out, nil
	}
	var out schedule.Outstanding
	if out.Entry, err = outstanding(open); err != nil {
		return nil, FireResult{}, err
	}
	if s.Entry.Command == schedule.PollCommand {
		if out.Polls, err = outstanding(cmd.Polls); err != nil {
			return nil, FireResult{}, err
		}
	}
	openIDs := func() []string {
		ids := make([]string, 0, len(out.Entry))
		for _, j := range out.Entry {
			ids = append(ids, j.ID)
		}
		return ids
	}

	res := FireResult{Version: cmd.Version}
	var evs []ledger.NewEvent
	record := func(typ string, slot schedule.Slot, data any, correlation string) {
		evs = append(evs, ledger.NewEvent{Stream: stream, ExpectedVersion: res.Version, Type: typ, Data: data,
			Meta: ledger.Meta{CorrelationID: correlation, Actor: events.ActorScheduler}})
		res.Version++
		res.Last = &slot
	}
	skipped := func(d events.ScheduleSkippedData) {
		d.Plugin, d.ID, d.Open = s.Plugin, s.Entry.ID, openIDs()
		record(events.ScheduleSkipped, schedule.Slot(d.Slot), d, "")
		res.Skipped = append(res.Skipped, d)
	}
	if k := cmd.Plan.Skip; k != nil {
		skipped(events.ScheduleSkippedData{Slot: events.Slot(k.Last), First: events.Slot(k.First), Count: k.Count, AtLeast: k.AtLeast, Reason: k.Reason})
	}
	// The breaker's state is read from the ledger, which does not show
	// what this decision appends: once Admit has changed it (a probe let
	// through), the plan's later firings wait for that probe's verdict.
	probe := ""
	for i, f := range cmd.Plan.Fire {
		job := jobs[i]
		d := s.Decide(out)
		switch {
		case d.Enqueues() && probe != "":
			d = schedule.Decision{Action: schedule.ActionSkip,
				Reason: fmt.Sprintf("breaker half-open: probe job %s, enqueued by this schedule's previous firing, decides", probe)}
		case d.Enqueues() && cmd.Admit != nil:
			allow, reason, admitted, err := cmd.Admit(tx, s.Plugin, s.Entry.Command, job.JobID, cmd.Now)
			if err != nil {
				return nil, FireResult{}, fmt.Errorf("admit: %w", err)
			}
			evs = append(evs, admitted...)
			if !allow {
				d = schedule.Decision{Action: schedule.ActionSkip, Reason: reason}
			} else if len(admitted) > 0 {
				probe = job.JobID
			}
		}
		if !d.Enqueues() {
			skipped(events.ScheduleSkippedData{Slot: events.Slot(f.Slot), First: events.Slot(f.Slot), Count: 1, Reason: d.Reason})
			continue
		}
		var cancels []ledger.NewEvent
		for _, id := range d.Cancel {
			j, ok := loaded[id]
			if !ok { // enqueued earlier in this decision: config forbids it (run_all needs queue)
				return nil, FireResult{}, fmt.Errorf("%w: if_running cancel of job %s enqueued by the same plan", ErrInvalidCommand, id)
			}
			canceled, _, err := Cancel{JobID: id, Actor: events.ActorScheduler, Now: cmd.Now,
				Reason: fmt.Sprintf("canceled by schedule %s: a new firing replaces it (if_running cancel)", stream)}.decide(j)
			if err != nil {
				return nil, FireResult{}, err
			}
			cancels = append(cancels, canceled...)
			out.Entry = slices.DeleteFunc(out.Entry, func(o schedule.Job) bool { return o.ID == id })
			out.Polls = slices.DeleteFunc(out.Polls, func(o schedule.Job) bool { return o.ID == id })
		}
		enqueued, _, err := job.decide(tx, nil)
		if err != nil {
			return nil, FireResult{}, err
		}
		out.Entry = append(out.Entry, schedule.Job{ID: job.JobID})
		if s.Entry.Command == schedule.PollCommand {
			out.Polls = append(out.Polls, schedule.Job{ID: job.JobID})
		}
		fired := events.ScheduleFiredData{Plugin: s.Plugin, ID: s.Entry.ID, Slot: events.Slot(f.Slot), JobID: job.JobID,
			Command: s.Entry.Command, Action: string(d.Action), Reason: d.Reason, Canceled: d.Cancel, Open: openIDs()}
		record(events.ScheduleFired, f.Slot, fired, job.JobID)
		evs = append(append(evs, cancels...), enqueued...)
		res.Fired = append(res.Fired, fired)
	}
	return evs, res, nil
}

// lastOpen returns the entry's jobs open as of its stream's newest event.
func lastOpen(last ledger.Event, found bool) ([]string, error) {
	if !found {
		return nil, nil
	}
	var d struct {
		Open []string `json:"open"`
	}
	if err := json.Unmarshal(last.Data, &d); err != nil {
		return nil, fmt.Errorf("decode %s v%d: %w", last.Stream, last.Version, err)
	}
	return d.Open, nil
}
