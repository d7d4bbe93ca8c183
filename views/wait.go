package views

import (
	"context"
	"encoding/json"
	"errors"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// WaitJob waits until job id is terminal (succeeded, dead or canceled),
// following its stream, the source of truth, as this or another process
// appends to it, and returns the job and the end of its last attempt (zero
// if none ended). It returns ctx's error if ctx ends first.
func WaitJob(ctx context.Context, l *ledger.Ledger, id string) (*commands.Job, events.AttemptEnded, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, events.AttemptEnded{}, contextError(ctx, err)
	}
	j, err := commands.FoldJob(evs)
	if err != nil {
		return nil, events.AttemptEnded{}, err
	}
	if !j.Terminal() {
		_, err = l.Follow(ctx, evs[len(evs)-1].Seq, ledger.Filter{Stream: events.JobStream(id)}, func(ev ledger.Event) error {
			evs = append(evs, ev)
			switch ev.Type {
			case events.JobSucceeded, events.JobDead, events.JobCanceled: // the events that end a job
				if j, err = commands.FoldJob(evs); err != nil {
					return err
				}
				if j.Terminal() {
					return ledger.ErrStopFollowing
				}
			}
			return nil
		})
		if err != nil {
			return nil, events.AttemptEnded{}, err
		}
	}
	return j, lastAttempt(evs), nil
}

// WaitTree waits until job id and every job routed from it, at any depth,
// are terminal, and returns the job's tree then (ReadJobTree, at most limit
// jobs: a larger tree is judged by the limit jobs nearest its root). It reads the tree view at each commit to the ledger, by this
// process or another (the wake-up taken before the read, as ledger.Follow
// does, so none is missed), and trusts it only when the projections have
// applied the whole log of its snapshot: a job's end and the children it
// routed are one transaction, so the view then never shows a parent ended
// without its children. A job not projected yet (just enqueued by another
// process) is waited for. It sleeps between reads as ledger.Follow does
// (ledger.WaitChanged): it never polls a watched ledger. It returns ctx's
// error if ctx ends first.
func WaitTree(ctx context.Context, l *ledger.Ledger, id string, limit int) (JobTree, error) {
	for {
		changed := l.Changed()
		tree, finished, err := treeFinished(ctx, l, id, limit)
		switch {
		case err != nil:
			return JobTree{}, contextError(ctx, err)
		case finished:
			return tree, nil
		}
		if err := l.WaitChanged(ctx, changed); err != nil {
			return JobTree{}, err
		}
	}
}

// treeFinished reads job id's tree once and reports whether the job and
// every job routed from it are terminal, by a view that has applied the
// whole log of its snapshot. A job not projected yet is not finished.
func treeFinished(ctx context.Context, l *ledger.Ledger, id string, limit int) (tree JobTree, finished bool, err error) {
	var projected bool
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		checkpoint, err := projections.CheckpointConn(conn)
		if err != nil {
			return err
		}
		head, err := queries.MaxSeq(conn)
		if err != nil {
			return err
		}
		projected = checkpoint >= head
		tree, err = readJobTree(conn, id, limit)
		return err
	})
	var notYet *JobNotFoundError
	switch {
	case errors.As(err, &notYet):
		return JobTree{}, false, nil
	case err != nil:
		return JobTree{}, false, err
	}
	return tree, projected && len(tree.Unfinished(id)) == 0, nil
}

// lastAttempt is the end of the last attempt among a job's events.
func lastAttempt(evs []ledger.Event) events.AttemptEnded {
	var last events.AttemptEnded
	for _, ev := range evs {
		switch ev.Type {
		case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
			_ = json.Unmarshal(ev.Data, &last)
		}
	}
	return last
}
