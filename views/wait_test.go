package views_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
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
