package views

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// Cut is a moment of the log: a seq, or a time that stands for the last
// seq recorded at or before it.
type Cut struct {
	Seq  int64     // used when Time is zero
	Time time.Time // when set, the cut is the last seq recorded at or before it
}

var digits = regexp.MustCompile(`^[0-9]+$`)

// ParseCut reads a cut as the CLI's --at and the API's ?at= give it: a seq
// (digits) or an RFC 3339 time. A bad one is a *CutError.
func ParseCut(s string) (Cut, error) {
	if digits.MatchString(s) {
		seq, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Cut{}, &CutError{Value: s}
		}
		return Cut{Seq: seq}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Cut{}, &CutError{Value: s}
	}
	return Cut{Time: t}, nil
}

// CutError is a moment that is neither a seq nor an RFC 3339 time.
type CutError struct{ Value string }

func (e *CutError) Error() string {
	return fmt.Sprintf("%q is neither a seq (digits) nor an RFC 3339 time (2026-03-01T12:00:00Z)", e.Value)
}

// ArchivedError is a cut at or before the archive boundary: the events up
// to it were moved to archive files, so the tree as it was then cannot be
// folded from the main file.
type ArchivedError struct {
	Cut     int64 // the seq asked for
	Through int64 // the newest seq archived
}

func (e *ArchivedError) Error() string {
	return fmt.Sprintf("seq %d is at or before the archive boundary (seq %d): the events up to it were moved to archive files, so the tree as it was then is not in the ledger",
		e.Cut, e.Through)
}

// NotYetError is a cut before a job tree's root was enqueued.
type NotYetError struct {
	JobID   string
	Root    string
	RootSeq int64 // the root's job.enqueued
	Cut     int64
}

func (e *NotYetError) Error() string {
	return fmt.Sprintf("job %s's tree did not exist yet at seq %d: its root %s was enqueued at seq %d", e.JobID, e.Cut, e.Root, e.RootSeq)
}

func (e *NotYetError) Unwrap() error { return ErrJobNotFound }

// JobAt is a job as its events up to a seq fold (commands.FoldJob): its
// job_queue row as it was then, with its baggage and links.
type JobAt struct {
	Job
	Context  json.RawMessage `json:"context,omitempty"`   // the baggage its plugin receives
	ReplayOf string          `json:"replay_of,omitempty"` // the job this one replays
	RetryOf  string          `json:"retry_of,omitempty"`  // the job this one retries
	// Progress is the running attempt's last reported progress (nil: none).
	Progress *events.Progressed `json:"progress,omitempty"`
	// Exports are the ids of the job's export items, every attempt's.
	Exports []string `json:"exports,omitempty"`
}

// JobTreeAt is a job tree as it was at a seq (AtSeq, recorded at At), or,
// both zero, as the job_queue projection holds it now (TreeNow).
type JobTreeAt struct {
	Root  string `json:"root_job_id"`
	AtSeq int64  `json:"at_seq,omitempty"`
	At    string `json:"at,omitempty"` // when event AtSeq was recorded (RFC 3339)
	// Jobs are the jobs enqueued at or before the cut, in enqueue order
	// (seq), the root first.
	Jobs      []JobAt `json:"jobs"`
	Truncated bool    `json:"truncated"`
	// AncestorsArchived: as JobTree's.
	AncestorsArchived bool `json:"ancestors_archived,omitempty"`
}

// TreeNow is the tree the projection holds now in JobTreeAt's shape, which
// marshals to the same JSON as tree itself.
func TreeNow(tree JobTree) JobTreeAt {
	out := JobTreeAt{Root: tree.Root, Jobs: make([]JobAt, 0, len(tree.Jobs)), Truncated: tree.Truncated, AncestorsArchived: tree.AncestorsArchived}
	for _, j := range tree.Jobs {
		out.Jobs = append(out.Jobs, JobAt{Job: j})
	}
	return out
}

// ReadJobTreeAt reads the tree of job id (a full id) as it was at cut: every
// job of the tree whose job.enqueued is at or before the cut, each folded
// from its events up to the cut, at most limit jobs. The tree is walked
// through job_queue_parent and each job read from its own stream, so the
// cost follows the tree, not the log; the moment of a time costs a
// bisection of the log by its primary key (ledger.SeqAt). A cut at or
// before the archive boundary is an *ArchivedError, one before the root
// was enqueued a *NotYetError.
//
// Tree membership comes from job_queue, which the projector fills shortly
// after each commit: a cut newer than the projector's checkpoint may miss
// the jobs enqueued since.
func ReadJobTreeAt(ctx context.Context, l *ledger.Ledger, id string, cut Cut, limit int) (JobTreeAt, error) {
	limit = min(max(limit, 1), math.MaxInt32) // limit+1 below must not overflow
	tree := JobTreeAt{Jobs: []JobAt{}}
	err := l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		seq, err := cutSeq(conn, cut)
		if err != nil {
			return err
		}
		tree.AtSeq = seq
		if seq > 0 {
			at, err := ledger.RecordedAt(conn, seq)
			if err != nil {
				return err
			}
			tree.At = at.Format(time.RFC3339Nano)
		}
		if tree.Root, tree.AncestorsArchived, err = rootOf(conn, id); err != nil {
			return err
		}
		var ids []queries.ListJobTreeAtRow
		err = queries.ListJobTreeAt(conn, queries.ListJobTreeAtParams{RootID: tree.Root, AtSeq: seq, MaxJobs: int64(limit) + 1},
			func(r queries.ListJobTreeAtRow) error { ids = append(ids, r); return nil })
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return notYet(conn, id, tree.Root, seq)
		}
		if len(ids) > limit {
			ids, tree.Truncated = ids[:limit], true
		}
		for _, r := range ids {
			evs, err := ledger.ReadStreamThrough(conn, events.JobStream(r.ID), seq)
			if err != nil {
				return err
			}
			j, err := foldJobAt(evs)
			if err != nil {
				return fmt.Errorf("job %s at seq %d: %w", r.ID, seq, err)
			}
			tree.Jobs = append(tree.Jobs, j)
		}
		return nil
	})
	if err != nil {
		return JobTreeAt{}, err
	}
	slices.SortFunc(tree.Jobs, func(a, b JobAt) int { return int(a.Seq - b.Seq) })
	return tree, nil
}

// cutSeq is the seq a cut stands for, refused if it is at or before the
// archive boundary.
func cutSeq(conn *sqlite.Conn, cut Cut) (int64, error) {
	seq := cut.Seq
	if !cut.Time.IsZero() {
		var err error
		if seq, err = ledger.SeqAt(conn, cut.Time); err != nil {
			return 0, err
		}
	}
	archived, err := ledger.ArchivedThrough(conn)
	if err != nil {
		return 0, err
	}
	if archived > 0 && seq <= archived {
		return 0, &ArchivedError{Cut: seq, Through: archived}
	}
	if last, err := queries.SeqBounds(conn); err != nil {
		return 0, err
	} else if seq > last.LastSeq {
		seq = last.LastSeq // the log as it stands: nothing newer exists
	}
	return seq, nil
}

// notYet is the error for a tree whose root is not enqueued by seq.
func notYet(conn *sqlite.Conn, id, root string, seq int64) error {
	rootSeq := int64(0)
	err := queries.GetJob(conn, root, func(r queries.GetJobRow) error { rootSeq = r.Seq; return nil })
	if err != nil {
		return err
	}
	return &NotYetError{JobID: id, Root: root, RootSeq: rootSeq, Cut: seq}
}

// foldJobAt folds a job's events (up to a cut) into the job_queue row they
// make, as projections.JobQueue would have held it then.
func foldJobAt(evs []ledger.Event) (JobAt, error) {
	j, err := commands.FoldJob(evs)
	if err != nil {
		return JobAt{}, err
	}
	out := JobAt{Context: j.Context, ReplayOf: j.ReplayOf, RetryOf: j.RetryOf, Progress: j.Progress, Job: Job{
		ID: j.JobID, Seq: evs[0].Seq, Plugin: j.Plugin, Command: j.Command, Payload: j.Payload, Status: j.Status,
		Attempt: int64(j.Attempt), MaxAttempts: int64(j.MaxAttempts), SubmittedBy: string(j.SubmittedBy),
		DedupeKey: optional(j.DedupeKey), CreatedAt: evs[0].RecordedAtText(), LastError: optional(j.LastError),
		ParentJobID: optional(j.ParentJobID), SourceEventID: optional(j.SourceEventID), CorrelationID: j.Correlation,
	}}
	if !j.NextRetryAt.IsZero() && !j.Terminal() {
		out.NextRetryAt = optional(commands.Time(j.NextRetryAt))
	}
	for _, ev := range evs {
		at := ev.RecordedAtText()
		switch ev.Type {
		case events.JobStarted:
			out.StartedAt = &at
		case events.JobSucceeded, events.JobDead, events.JobCanceled:
			out.CompletedAt = &at
		case events.JobExported:
			var d struct {
				ID string `json:"export_item_id"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return JobAt{}, err
			}
			out.Exports = append(out.Exports, d.ID)
		case events.JobStderrWritten, events.JobRetried, events.JobReplayed, events.JobLeaseRenewed, events.JobSuperseded:
			continue // the projection's row does not change
		}
		out.UpdatedSeq = ev.Seq
	}
	return out, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
