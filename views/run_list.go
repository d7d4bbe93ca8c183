package views

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// ErrBadCursor means a page cursor is not one this listing gave.
var ErrBadCursor = errors.New("bad page cursor")

// RunFilter narrows ListRuns; an empty field matches every run.
type RunFilter struct {
	TaskID   string
	PluginID string
	Status   RunStatus
	// After is the cursor of the page to read: "" for the first (newest
	// runs), else the Next of the page before.
	After string
	// Limit is how many runs a page holds (DefaultRunPage if 0, MaxRunPage
	// at most).
	Limit int
}

// RunPage is one page of runs, newest first, and the cursor of the next
// page ("" when this is the last).
type RunPage struct {
	Runs []RunRecord `json:"runs"`
	Next string      `json:"next,omitempty"`
}

// DefaultRunPage is how many runs a page holds when the caller gives no
// limit; MaxRunPage the most it may hold.
const (
	DefaultRunPage = 50
	MaxRunPage     = 500
)

// ListRuns lists the runs that match f, newest first (by creation), one
// page at a time: job_queue's indexes find the page (by task, else status,
// else plugin, else all; the other filters checked on each row, as job
// listings are), and each run's record is folded from its stream in the
// same read, so a page costs the runs it shows, not the history. The
// projection is filled shortly after each commit: a run created a moment
// ago by another process may be missing from the first page.
func ListRuns(ctx context.Context, l *ledger.Ledger, f RunFilter) (RunPage, error) {
	before := int64(math.MaxInt64)
	if f.After != "" {
		n, err := strconv.ParseInt(f.After, 10, 64)
		if err != nil || n <= 0 {
			return RunPage{}, fmt.Errorf("%w: %q is not a runs page cursor", ErrBadCursor, f.After)
		}
		before = n
	}
	if f.Status != "" {
		if _, err := ParseRunStatus(string(f.Status)); err != nil {
			return RunPage{}, err
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultRunPage
	}
	limit = min(limit, MaxRunPage)
	page := RunPage{Runs: []RunRecord{}}
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		type found struct {
			id  string
			seq int64
		}
		var ids []found
		add := func(id string, seq int64) error { ids = append(ids, found{id, seq}); return nil }
		if err := listRunIDs(conn, f, before, limit+1, add); err != nil {
			return err
		}
		if len(ids) > limit {
			ids = ids[:limit]
			page.Next = strconv.FormatInt(ids[limit-1].seq, 10)
		}
		for _, run := range ids {
			evs, err := ledger.ReadStreamThrough(conn, events.JobStream(run.id), math.MaxInt64)
			if err != nil {
				return err
			}
			if len(evs) == 0 {
				continue // archived, its row not forgotten yet
			}
			r, err := FoldRunRecord(evs)
			if err != nil {
				return fmt.Errorf("run %s: %w", run.id, err)
			}
			page.Runs = append(page.Runs, r)
		}
		return nil
	})
	if err != nil {
		return RunPage{}, fmt.Errorf("list runs: %w", err)
	}
	return page, nil
}

// listRunIDs calls add for up to limit runs that match f, created before
// seq before, newest first, each through the index that narrows it most:
// a task's (job_queue_by_task), else a status's (the job listings',
// listJobs; failed and timeout are dead jobs told apart by timed_out), else
// a plugin's, else job_queue's seq.
func listRunIDs(conn *sqlite.Conn, f RunFilter, before int64, limit int, add func(id string, seq int64) error) error {
	n := int64(limit)
	switch {
	case f.TaskID != "":
		return queries.ListRunIDsOfTask(conn, queries.ListRunIDsOfTaskParams{TaskID: f.TaskID, Plugin: f.PluginID, Status: string(f.Status), BeforeSeq: before, MaxRuns: n},
			func(r queries.ListRunIDsOfTaskRow) error { return add(r.ID, r.Seq) })
	case f.Status == RunFailed || f.Status == RunTimeout:
		timedOut := int64(0)
		if f.Status == RunTimeout {
			timedOut = 1
		}
		return queries.ListDeadRunIDs(conn, queries.ListDeadRunIDsParams{TimedOut: timedOut, Plugin: f.PluginID, BeforeSeq: before, MaxRuns: n},
			func(r queries.ListDeadRunIDsRow) error { return add(r.ID, r.Seq) })
	case f.Status != "" || f.PluginID != "":
		return listJobs(conn, JobFilter{Status: events.Status(f.Status), Plugin: f.PluginID, Before: before, Limit: limit},
			func(r queries.GetJobRow) error { return add(r.ID, r.Seq) })
	}
	return queries.ListRunIDs(conn, queries.ListRunIDsParams{BeforeSeq: before, MaxRuns: n},
		func(r queries.ListRunIDsRow) error { return add(r.ID, r.Seq) })
}
