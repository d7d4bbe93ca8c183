package views

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
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

// ListRuns lists the runs that match f, newest first, one page at a time.
func ListRuns(ctx context.Context, l *ledger.Ledger, f RunFilter) (RunPage, error) {
	before := int64(0)
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
	for {
		jobs, err := ListJobs(ctx, l, JobFilter{Plugin: f.PluginID, Status: jobStatusOf(f.Status), Before: before, Limit: limit})
		if err != nil {
			return RunPage{}, err
		}
		for _, j := range jobs {
			before = j.Seq
			r, err := ReadRunRecord(ctx, l, j.ID)
			if err != nil {
				return RunPage{}, err
			}
			if (f.TaskID != "" && (r.TaskID == nil || *r.TaskID != f.TaskID)) || (f.Status != "" && r.Status != f.Status) {
				continue
			}
			page.Runs = append(page.Runs, r)
			if len(page.Runs) == limit {
				page.Next = strconv.FormatInt(j.Seq, 10)
				return page, nil
			}
		}
		if len(jobs) < limit {
			return page, nil
		}
	}
}

// jobStatusOf is the job status of runs in status s ("" for any).
func jobStatusOf(s RunStatus) events.Status {
	switch s {
	case RunFailed, RunTimeout:
		return events.StatusDead
	case "":
		return ""
	}
	return events.Status(s)
}
