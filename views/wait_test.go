package views_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// TestWaitJobReturnsTheTerminalJobAndItsLastAttempt: waiting for a job
// goes past a failed attempt and its retry, and returns the job once it
// succeeded, with the end of its last attempt.
func TestWaitJobReturnsTheTerminalJobAndItsLastAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 2)
	type result struct {
		status  events.Status
		attempt int
		err     error
	}
	done := make(chan result, 1)
	go func() {
		j, last, err := views.WaitJob(b.ctx, b.l, id)
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{j.Status, last.Attempt, nil}
	}()
	b.start(t, id)
	b.complete(t, id, 1, failed("boom\n"))
	b.start(t, id)
	b.complete(t, id, 2, ok)
	require.Equal(t, result{events.StatusSucceeded, 2, nil}, <-done)

	// A job that is finished already is returned at once.
	j, last, err := views.WaitJob(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, j.Status)
	require.Equal(t, 2, last.Attempt)
	require.Equal(t, int64(40), last.DurationMS)
}

// TestWaitJobEndsWithItsContext: a wait for a job that does not finish
// ends with its context's error; a canceled job is terminal, with no
// attempt.
func TestWaitJobEndsWithItsContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(t, "echo", 1)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := views.WaitJob(ctx, b.l, id)
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	b.cancel(t, id, "not needed")
	j, last, err := views.WaitJob(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, events.StatusCanceled, j.Status)
	require.Zero(t, last.Attempt)
}

// TestWaitTree: WaitTree returns a job's tree once the job and every job
// routed from it, at any depth, are terminal; never while one of them is
// queued or running, while the projections have not applied the log, nor
// when they have applied a parent's end without the children routed in the
// same transaction. A tree already finished is returned at once.
func TestWaitTree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type result struct {
		tree views.JobTree
		err  error
	}
	root := b.enqueue(t, "echo", 1)
	done := make(chan result, 1)
	go func() {
		tree, err := views.WaitTree(b.ctx, b.l, root, 100)
		done <- result{tree, err}
	}()
	// notYet: a wait given a moment returns nothing (the one in the
	// goroutine goes on).
	notYet := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b.ctx, 100*time.Millisecond)
		defer cancel()
		tree, err := views.WaitTree(ctx, b.l, root, 100)
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s: %+v", what, tree)
		select {
		case r := <-done:
			t.Fatalf("%s: WaitTree returned %+v, %v", what, r.tree, r.err)
		default:
		}
	}
	notYet("the root not projected")
	b.project(t)
	notYet("the root queued")
	b.start(t, root)
	b.project(t)
	notYet("the root running")
	b.complete(t, root, 1, ok, commands.Enqueue{Plugin: "tally", Command: "handle", MaxAttempts: 1},
		commands.Enqueue{Plugin: "greet", Command: "handle", MaxAttempts: 1})
	notYet("the root's end not projected")
	// One event applied: the root's end, without the children it routed.
	_, err := projections.New(b.l, projections.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), BatchSize: 1}).RunOnce(b.ctx)
	require.NoError(t, err)
	tree, err := views.ReadJobTree(b.ctx, b.l, root, 100)
	require.NoError(t, err)
	require.Len(t, tree.Jobs, 1)
	require.Equal(t, events.StatusSucceeded, tree.Jobs[0].Status, "the view shows the root ended, alone")
	notYet("the root's children not projected")
	b.project(t)
	tree, err = views.ReadJobTree(b.ctx, b.l, root, 100)
	require.NoError(t, err)
	require.Len(t, tree.Jobs, 3)
	tally, greet := tree.Jobs[1].ID, tree.Jobs[2].ID
	require.Equal(t, []string{tally, greet}, ids(tree.Unfinished(root)))
	require.Equal(t, []string{greet}, ids(tree.Unfinished(greet)), "a subtree")
	notYet("the children queued")

	b.start(t, tally)
	b.complete(t, tally, 1, ok, commands.Enqueue{Plugin: "echo", Command: "handle", MaxAttempts: 1})
	b.cancel(t, greet, "not needed")
	b.project(t)
	notYet("a grandchild queued")
	tree, err = views.ReadJobTree(b.ctx, b.l, root, 100)
	require.NoError(t, err)
	grandchild := tree.Jobs[3].ID
	b.start(t, grandchild)
	b.complete(t, grandchild, 1, ok)
	b.project(t)

	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, []string{root, tally, greet, grandchild}, ids(r.tree.Jobs))
		require.Equal(t, map[string]string{root: "succeeded/1", tally: "succeeded/1", greet: "canceled/1", grandchild: "succeeded/1"},
			statuses(views.TreeNow(r.tree)))
	case <-time.After(10 * time.Second):
		t.Fatal("WaitTree did not return once the tree finished")
	}
	tree, err = views.WaitTree(b.ctx, b.l, root, 100)
	require.NoError(t, err, "a finished tree at once")
	require.Len(t, tree.Jobs, 4)
}
