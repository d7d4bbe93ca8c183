package views

import (
	"context"
	"strings"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// RunDelta is one change of a run as the runs channel carries it (spec
// run-protocol.md §6.1): its status and progress after an event of its
// job. Seq is that event's, the point to resume after (Last-Event-ID).
type RunDelta struct {
	Op        string    `json:"op"` // RunAdded | RunChanged
	RunID     string    `json:"run_id"`
	Status    RunStatus `json:"status"`
	Progress  *float64  `json:"progress"`
	UpdatedAt float64   `json:"updated_at"`
	Seq       int64     `json:"seq"`
}

// The ops of a RunDelta.
const (
	RunAdded   = "add"
	RunChanged = "change"
)

// RunDeltaFilter narrows FollowRuns; an empty field matches every run.
// Status matches a run's status after the change.
type RunDeltaFilter struct {
	RunID    string
	TaskID   string
	PluginID string
	Status   RunStatus
}

// FollowRuns calls fn with every change of a run's status or progress
// recorded after seq after, oldest first, and goes on with those appended
// later until ctx ends (its error) or fn returns ledger.ErrStopFollowing
// (nil) or another error (ledger.Follow: it never polls, and a slow fn
// holds no connection). A run is folded as ReadRunRecord folds it, so a
// delta agrees with the record; a run first met after its creation is
// read as it stood just before. Runs that ended are forgotten: what follows
// their end (a retry's link) changes neither.
func FollowRuns(ctx context.Context, l *ledger.Ledger, after int64, f RunDeltaFilter, fn func(RunDelta) error) error {
	lf := ledger.Filter{}
	if f.RunID != "" {
		lf.Stream = events.JobStream(f.RunID)
	}
	active := map[string]*runFold{}
	_, err := l.Follow(ctx, after, lf, func(ev ledger.Event) error {
		id, ok := strings.CutPrefix(ev.Stream, events.JobStream(""))
		if !ok {
			return nil
		}
		op := RunChanged
		run := active[id]
		switch {
		case ev.Type == events.JobEnqueued:
			run, op = &runFold{r: RunRecord{Kind: RunKindPlugin}}, RunAdded
		case run == nil:
			evs, err := readStreamThrough(ctx, l, id, ev.Seq-1)
			if err != nil {
				return err
			}
			run = &runFold{r: RunRecord{Kind: RunKindPlugin}}
			for _, e := range evs {
				if err := run.apply(e); err != nil {
					return err
				}
			}
			if run.r.Status.Terminal() {
				return nil // ended before: nothing changes it
			}
		}
		before, progress := run.r.Status, run.r.Progress
		if err := run.apply(ev); err != nil {
			return err
		}
		active[id] = run
		r := &run.r
		if r.Status.Terminal() {
			delete(active, id)
		}
		if op == RunChanged && r.Status == before && sameProgress(r.Progress, progress) {
			return nil
		}
		if !f.matches(r) {
			return nil
		}
		return fn(RunDelta{Op: op, RunID: id, Status: r.Status, Progress: r.Progress, UpdatedAt: r.UpdatedAt, Seq: ev.Seq})
	})
	return err
}

func (f RunDeltaFilter) matches(r *RunRecord) bool {
	switch {
	case f.RunID != "" && r.RunID != f.RunID,
		f.PluginID != "" && r.PluginID != f.PluginID,
		f.Status != "" && r.Status != f.Status,
		f.TaskID != "" && (r.TaskID == nil || *r.TaskID != f.TaskID):
		return false
	}
	return true
}

func sameProgress(a, b *float64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// FollowRunExports calls fn with each export item of run id recorded
// after seq after (0: all of them), in order, and goes on with those
// appended later, as FollowRuns does. An item is durable before it is
// read here, so a client that reconnects with the seq of the last item it
// got (Last-Event-ID) misses none.
func FollowRunExports(ctx context.Context, l *ledger.Ledger, id string, after int64, fn func(ExportItem) error) error {
	_, err := l.Follow(ctx, after, ledger.Filter{Stream: events.JobStream(id), Type: events.JobExported}, func(ev ledger.Event) error {
		item, err := ExportItemOf(ev)
		if err != nil {
			return err
		}
		return fn(item)
	})
	return err
}
