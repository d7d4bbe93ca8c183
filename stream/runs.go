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

// RunEvent is the SSE event name of a run delta (views.RunDelta);
// ExportEvent of an export item; EndEvent of the message that ends a
// stream of one run.
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

// endsJob lists the event types that end a job (and its run).
var endsJob = map[string]bool{events.JobSucceeded: true, events.JobDead: true, events.JobCanceled: true}

// RunsHandler serves GET /runs/stream: the runs channel as Server-Sent
// Events, read from the ledger. Each message is "event: run", its id the
// seq of the job event the change comes from, its data a views.RunDelta
// of the run as of that event. Without Last-Event-ID nor ?after= it starts at the
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

// FollowRuns sends each change of q's runs after seq q.After
// (views.FollowRuns, as "event: run" messages whose data is a
// views.RunDelta and id its seq), in seq order, until ctx ends; with
// q.RunID, until that run's terminal change (at once when it ended at or
// before q.After). q.Head is not read: the caller sets After. GET
// /runs/stream and ductile run watch follow runs with it.
func FollowRuns(ctx context.Context, l *ledger.Ledger, q RunQuery, send func(Message) error) error {
	if q.RunID != "" {
		ended, err := endedAt(ctx, l, q.RunID)
		if err != nil {
			return err
		}
		if ended > 0 && ended <= q.After {
			return nil
		}
	}
	f := views.RunDeltaFilter{RunID: q.RunID, TaskID: q.TaskID, PluginID: q.PluginID, Status: q.Status}
	err := views.FollowRuns(ctx, l, q.After, f, func(d views.RunDelta) error {
		if err := send(Message{ID: d.Seq, Event: RunEvent, Data: d}); err != nil {
			return err
		}
		if q.RunID != "" && d.Status.Terminal() {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	if errors.Is(err, ledger.ErrStopFollowing) {
		return nil
	}
	return err
}

// endedAt is the seq of the event that ended run id, or 0 while it has not
// ended (or does not exist yet).
func endedAt(ctx context.Context, l *ledger.Ledger, id string) (int64, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return 0, err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if endsJob[evs[i].Type] {
			return evs[i].Seq, nil
		}
	}
	return 0, nil
}
