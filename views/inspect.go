package views

import (
	"context"
	"encoding/json"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// Attempt is one attempt of a job, as the job_log projection holds it.
type Attempt struct {
	Attempt         int64           `json:"attempt"`
	Status          string          `json:"status"`
	Kind            *string         `json:"kind,omitempty"`
	Response        json.RawMessage `json:"response,omitempty"`
	Stdout          *string         `json:"stdout,omitempty"`
	Stderr          *string         `json:"stderr,omitempty"`
	StderrTruncated bool            `json:"stderr_truncated,omitempty"`
	Error           *string         `json:"error,omitempty"`
	ExitCode        *int64          `json:"exit_code,omitempty"`
	StartedAt       string          `json:"started_at"`
	CompletedAt     *string         `json:"completed_at,omitempty"`
	DurationMS      *int64          `json:"duration_ms,omitempty"`
	// Worker is who ran the attempt (its job.started's worker: a remote
	// worker's name, or "<host>/local"); "" in events recorded before it.
	Worker string `json:"worker,omitempty"`
}

// Inspection is everything known about one job: its state, cancel, retry
// links, attempts, events and children.
type Inspection struct {
	Job       Job     `json:"job"`
	Cancel    *Cancel `json:"cancel,omitempty"`
	RetryOf   string  `json:"retry_of,omitempty"`   // the job this one retries
	RetriedAs string  `json:"retried_as,omitempty"` // the job that retries this one
	// ReplayOf is the job this one replays, ReplayedAs the jobs that replay it.
	ReplayOf   string   `json:"replay_of,omitempty"`
	ReplayedAs []string `json:"replayed_as,omitempty"`
	Depth      int      `json:"depth,omitempty"` // routes between the job and its root (0: a root)
	// DroppedRoutes are the routed jobs its success did not enqueue, and why.
	DroppedRoutes []events.DroppedRoute `json:"dropped_routes,omitempty"`
	Attempts      []Attempt             `json:"attempts"`
	Events        []Event               `json:"events"`
	Children      []Job                 `json:"children"`
	// Progress is the last progress its running (or last) attempt reported
	// (nil: none), Exports its export items, every attempt's, in order, and
	// ResultRefs the ones its end committed as its result set.
	Progress   *events.Progressed `json:"progress,omitempty"`
	Exports    []ExportItem       `json:"exports,omitempty"`
	ResultRefs []string           `json:"result_refs,omitempty"`
}

// Cancel is a job's cancel, from its stream: who asked, when and why, and
// how the job ended if that says more.
type Cancel struct {
	Reason      string `json:"reason"`
	By          string `json:"by,omitempty"`
	RequestedAt string `json:"requested_at"`
	Pending     bool   `json:"pending"`         // requested, the plugin not stopped yet
	Ended       string `json:"ended,omitempty"` // job.canceled's reason, when the request's differs
}

// Inspect reads job id (an id or a unique prefix of one, see
// ResolveJobID): its row, attempts and children from the projections in
// one read transaction, and its events, cancel and retry links from its
// stream. A job enqueued by another process and not projected yet has
// only its id and its events.
func Inspect(ctx context.Context, l *ledger.Ledger, id string) (*Inspection, error) {
	id, err := ResolveJobID(ctx, l, id)
	if err != nil {
		return nil, err
	}
	in := &Inspection{Attempts: []Attempt{}, Events: []Event{}, Children: []Job{}}
	found := false
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		if err := queries.GetJob(conn, id, func(r queries.GetJobRow) error { in.Job, found = jobOf(r), true; return nil }); err != nil {
			return err
		}
		if err := queries.ListJobAttempts(conn, id, func(r queries.ListJobAttemptsRow) error {
			a := Attempt{Attempt: r.Attempt, Status: r.Status, Kind: r.Kind, Stdout: r.Stdout, Stderr: r.Stderr,
				StderrTruncated: r.StderrTruncated != 0, Error: r.LastError, ExitCode: r.ExitCode, StartedAt: r.StartedAt,
				CompletedAt: r.CompletedAt, DurationMS: r.DurationMs}
			if r.Result != nil {
				a.Response = json.RawMessage(*r.Result)
			}
			in.Attempts = append(in.Attempts, a)
			return nil
		}); err != nil {
			return err
		}
		return queries.ListChildJobs(conn, id, func(r queries.ListChildJobsRow) error {
			in.Children = append(in.Children, jobOf(queries.GetJobRow(r)))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, err
	}
	if !found && len(evs) == 0 {
		return nil, &JobNotFoundError{ID: id}
	}
	if !found { // enqueued by another process, not projected yet
		in.Job.ID = id
	}
	for _, ev := range evs {
		in.Events = append(in.Events, EventOf(ev))
	}
	in.linksFromEvents(evs)
	in.workersFromEvents(evs)
	if err := in.runFromEvents(evs); err != nil {
		return nil, err
	}
	return in, nil
}

// linksFromEvents fills in what only the job's stream holds: its cancel and
// its retry links.
func (in *Inspection) linksFromEvents(evs []ledger.Event) {
	for _, ev := range evs {
		switch ev.Type {
		case events.JobEnqueued:
			var d events.Enqueued
			if json.Unmarshal(ev.Data, &d) == nil {
				in.RetryOf, in.Depth, in.ReplayOf = d.RetryOf, d.Depth, d.ReplayOf
			}
		case events.JobSucceeded:
			var d struct {
				DroppedRoutes []events.DroppedRoute `json:"dropped_routes"`
			}
			if json.Unmarshal(ev.Data, &d) == nil {
				in.DroppedRoutes = d.DroppedRoutes
			}
		case events.JobReplayed:
			var d events.Replayed
			if json.Unmarshal(ev.Data, &d) == nil {
				in.ReplayedAs = append(in.ReplayedAs, d.ReplayJobID)
			}
		case events.JobRetried:
			var d events.Retried
			if json.Unmarshal(ev.Data, &d) == nil {
				in.RetriedAs = d.RetryJobID
			}
		case events.JobCancelRequested, events.JobCanceled:
			var d events.Canceled
			_ = json.Unmarshal(ev.Data, &d)
			if in.Cancel != nil { // the end of a requested cancel
				in.Cancel.Pending = false
				if d.Reason != in.Cancel.Reason {
					in.Cancel.Ended = d.Reason
				}
				continue
			}
			m, _ := ev.Metadata()
			in.Cancel = &Cancel{Reason: d.Reason, By: string(m.Actor), RequestedAt: ev.RecordedAtText(), Pending: ev.Type == events.JobCancelRequested}
		}
	}
}

// workersFromEvents names the worker of each attempt, from its
// job.started.
func (in *Inspection) workersFromEvents(evs []ledger.Event) {
	byAttempt := map[int64]string{}
	for _, ev := range evs {
		if ev.Type != events.JobStarted {
			continue
		}
		var d events.Started
		if json.Unmarshal(ev.Data, &d) == nil && d.Worker != nil {
			byAttempt[int64(d.Attempt)] = d.Worker.Name
		}
	}
	for i := range in.Attempts {
		in.Attempts[i].Worker = byAttempt[in.Attempts[i].Attempt]
	}
}

// runFromEvents fills in what the job reported as a run: its progress, its
// export items and its result set.
func (in *Inspection) runFromEvents(evs []ledger.Event) error {
	for _, ev := range evs {
		switch ev.Type {
		case events.JobStarted:
			in.Progress = nil // a new attempt reports anew
		case events.JobProgressed:
			var d events.Progressed
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return fmt.Errorf("read %s (seq %d): %w", ev.Type, ev.Seq, err)
			}
			in.Progress = &d
		case events.JobExported:
			item, err := ExportItemOf(ev)
			if err != nil {
				return err
			}
			in.Exports = append(in.Exports, item)
		case events.JobSucceeded, events.JobDead, events.JobCanceled:
			var d struct {
				ResultRefs []string `json:"result_refs"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return fmt.Errorf("read %s (seq %d): %w", ev.Type, ev.Seq, err)
			}
			in.ResultRefs = d.ResultRefs
		}
	}
	return nil
}
