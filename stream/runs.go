package stream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// RunDelta is one message of the runs channel (spec run-protocol.md §6.1):
// a plugin run was created (op add) or changed (op change), as of the
// ledger event whose seq is the message's id.
type RunDelta struct {
	Op        string          `json:"op"` // add | change
	RunID     string          `json:"run_id"`
	Status    views.RunStatus `json:"status"`
	Progress  *float64        `json:"progress"`
	Stage     *string         `json:"stage,omitempty"`
	Message   *string         `json:"message,omitempty"`
	UpdatedAt float64         `json:"updated_at"`
}

// Run delta ops.
const (
	OpAdd    = "add"
	OpChange = "change"
)

// RunEvent is the SSE event name of a run delta; ExportEvent of an export
// item; EndEvent of the message that ends a stream of one run.
const (
	RunEvent    = "run"
	ExportEvent = "export"
	EndEvent    = "end"
)

// RunQuery is what GET /runs/stream follows: changes after seq After of
// the runs that match every filter given.
type RunQuery struct {
	After    int64
	Head     bool // no Last-Event-ID nor ?after=: start at the head
	RunID    string
	TaskID   string
	PluginID string
	Status   views.RunStatus
}

// ParseRunQuery reads GET /runs/stream's start (Last-Event-ID or ?after=)
// and filters (?run_id=, ?task_id=, ?plugin_id=, ?status=).
func ParseRunQuery(r *http.Request) (RunQuery, error) {
	var q RunQuery
	var err error
	if q.After, q.Head, err = parseStart(r); err != nil {
		return q, err
	}
	v := r.URL.Query()
	q.RunID, q.TaskID, q.PluginID = v.Get("run_id"), v.Get("task_id"), v.Get("plugin_id")
	if strings.ContainsAny(q.RunID, "/ ,") {
		return q, &UsageError{fmt.Sprintf("run_id %q is not a run id", q.RunID), "give a whole run id, as GET /runs answers it"}
	}
	if s := v.Get("status"); s != "" {
		if q.Status, err = views.ParseRunStatus(s); err != nil {
			return q, &UsageError{err.Error(), "give one run status, or leave status out"}
		}
	}
	return q, nil
}

// changesRun lists the event types of a job's stream that change its run's
// status or progress: each is one delta.
var changesRun = map[string]bool{
	events.JobEnqueued: true, events.JobStarted: true, events.JobProgressed: true, events.JobSucceeded: true,
	events.JobFailed: true, events.JobTimedOut: true, events.JobRetryScheduled: true, events.JobDead: true,
	events.JobCancelRequested: true, events.JobCanceled: true, events.JobRecovered: true,
}

// endsJob lists the event types that end a job (and its run).
var endsJob = map[string]bool{events.JobSucceeded: true, events.JobDead: true, events.JobCanceled: true}

// RunsHandler serves GET /runs/stream: the runs channel as Server-Sent
// Events, read from the ledger. Each message is "event: run", its id the
// seq of the job event the change comes from, its data a RunDelta of the
// run as of that event. Without Last-Event-ID nor ?after= it starts at the
// head (new changes only). With ?run_id= it ends after the run's terminal
// change (at once if it ended before, after the changes since the start).
func RunsHandler(l *ledger.Ledger, opts Options) http.Handler {
	return &runsHandler{l: l, sse: newSSE(opts)}
}

type runsHandler struct {
	l   *ledger.Ledger
	sse *sse
}

func (h *runsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, err := ParseRunQuery(r)
	if err != nil {
		writeUsage(w, err)
		return
	}
	h.sse.serveFrom(w, r, h.l, q.After, q.Head, func(ctx context.Context, after int64, send func(Message) error) error {
		q.After = after
		return FollowRuns(ctx, h.l, q, send)
	})
}

// FollowRuns calls send with the delta of each change of q's runs after
// seq q.After (q.Head is not read: the caller sets After), in seq order,
// until ctx ends; with q.RunID, until that run's terminal change (at once
// when it had ended already). GET /runs/stream and ductile run watch
// follow runs with it.
func FollowRuns(ctx context.Context, l *ledger.Ledger, q RunQuery, send func(Message) error) error {
	after := q.After
	f := ledger.Filter{}
	if q.RunID != "" {
		f.Stream = events.JobStream(q.RunID)
		rec, err := views.ReadRunRecord(ctx, l, q.RunID)
		var notFound *views.JobNotFoundError
		switch {
		case errors.As(err, &notFound):
			// Not created yet: its first event is followed like any.
		case err != nil:
			return err
		case rec.Status.Terminal():
			// Ended: send what changed since after, then end.
			return sendEnded(ctx, l, q.RunID, after, func(ev views.Event) error {
				_, err := sendDelta(ctx, l, q, ev, send)
				return err
			})
		}
	}
	// owners caches each run's plugin and task (they never change), so a
	// change of a run the filters leave out costs no read of its stream.
	owners := map[string]owner{}
	filtered := q.PluginID != "" || q.TaskID != ""
	err := views.FollowEvents(ctx, l, after, f, func(ev views.Event) error {
		if !changesRun[ev.Type] || !strings.HasPrefix(ev.Stream, "job/") {
			return nil
		}
		id := events.JobIDFromStream(ev.Stream)
		if o, ok := owners[id]; ok && !q.owns(o) {
			return nil
		}
		rec, err := sendDelta(ctx, l, q, ev, send)
		if err != nil {
			return err
		}
		if filtered {
			if len(owners) >= maxOwners {
				clear(owners)
			}
			owners[id] = owner{plugin: rec.PluginID, task: deref(rec.TaskID)}
		}
		if q.RunID != "" && endsJob[ev.Type] {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	if errors.Is(err, ledger.ErrStopFollowing) {
		return nil
	}
	return err
}

// sendEnded calls fn with each event of ended run id's stream after seq
// after: a run that ended has all its events, so they are read at once
// (and no connection is held while fn waits for a client).
func sendEnded(ctx context.Context, l *ledger.Ledger, id string, after int64, fn func(views.Event) error) error {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if ev.Seq <= after {
			continue
		}
		if err := fn(views.EventOf(ev)); err != nil {
			return err
		}
	}
	return nil
}

// owner is a run's plugin and task.
type owner struct{ plugin, task string }

// owns reports whether a run of o passes q's plugin and task filters.
func (q RunQuery) owns(o owner) bool {
	return (q.PluginID == "" || o.plugin == q.PluginID) && (q.TaskID == "" || o.task == q.TaskID)
}

// maxOwners bounds FollowRuns' cache of runs' plugins and tasks.
const maxOwners = 10_000

// sendDelta sends the delta of ev's run as of ev, if ev changes it and the
// run matches q; it returns the run as of ev.
func sendDelta(ctx context.Context, l *ledger.Ledger, q RunQuery, ev views.Event, send func(Message) error) (views.RunRecord, error) {
	if !changesRun[ev.Type] {
		return views.RunRecord{}, nil
	}
	id := events.JobIDFromStream(ev.Stream)
	rec, err := views.ReadRunRecordAt(ctx, l, id, ev.Seq)
	if err != nil {
		return rec, fmt.Errorf("read run %s at seq %d: %w", id, ev.Seq, err)
	}
	if !q.owns(owner{plugin: rec.PluginID, task: deref(rec.TaskID)}) || (q.Status != "" && rec.Status != q.Status) {
		return rec, nil
	}
	d := RunDelta{Op: OpChange, RunID: id, Status: rec.Status, Progress: rec.Progress, Stage: rec.Stage, Message: rec.Message, UpdatedAt: rec.UpdatedAt}
	if ev.Type == events.JobEnqueued {
		d.Op = OpAdd
	}
	return rec, send(Message{ID: ev.Seq, Event: RunEvent, Data: d})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
