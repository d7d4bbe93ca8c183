package engine_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// queued enqueues a job of echo poll and returns its id.
func (f *fixture) queued(t *testing.T) string {
	t.Helper()
	res, err := f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "poll", By: events.ActorCLI})
	require.NoError(t, err)
	return res.JobID
}

// TestCancel: a queued job is canceled at once, named by a unique prefix;
// a dry run reads it and appends nothing; a finished job's cancel is a
// transition error with the status it had.
func TestCancel(t *testing.T) {
	f := setup(t, nil)
	id := f.queued(t)
	head := f.head(t)
	dry, err := f.eng.Cancel(f.ctx, engine.Cancel{Job: id, By: events.ActorCLI, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, engine.Canceled{JobID: id, Before: events.StatusQueued, Status: events.StatusQueued}, dry)
	require.Equal(t, head, f.head(t))

	res, err := f.eng.Cancel(f.ctx, engine.Cancel{Job: id[len(id)-12:], Reason: "enough", By: events.ActorAPI})
	require.NoError(t, err)
	require.Equal(t, engine.Canceled{JobID: id, Before: events.StatusQueued, Status: events.StatusCanceled}, res)
	require.Equal(t, events.StatusCanceled, f.job(t, id).Status)

	res, err = f.eng.Cancel(f.ctx, engine.Cancel{Job: id, By: events.ActorAPI})
	require.ErrorIs(t, err, commands.ErrInvalidTransition)
	require.Equal(t, events.StatusCanceled, res.Before)
	_, err = f.eng.Cancel(f.ctx, engine.Cancel{Job: "0123456789ab", By: events.ActorAPI})
	require.Error(t, err)
}

// TestRetry: a canceled job is retried as a new job linked to it, with the
// attempt budget the config gives its plugin; a second retry is refused
// with the job as it is now; with Check, a queued job and one whose plugin
// cannot run are refused before anything is appended.
func TestRetry(t *testing.T) {
	f := setup(t, nil)
	queued := f.queued(t)
	head := f.head(t)
	res, err := f.eng.Retry(f.ctx, engine.Redo{Job: queued, By: events.ActorCLI, Check: true})
	require.ErrorIs(t, err, commands.ErrInvalidTransition)
	require.Equal(t, events.StatusQueued, res.Old.Status)
	require.Equal(t, head, f.head(t))

	_, err = f.eng.Cancel(f.ctx, engine.Cancel{Job: queued, By: events.ActorCLI})
	require.NoError(t, err)
	dry, err := f.eng.Retry(f.ctx, engine.Redo{Job: queued, By: events.ActorCLI, Check: true, DryRun: true})
	require.NoError(t, err)
	require.Empty(t, dry.JobID)
	require.Equal(t, queued, dry.Old.JobID)

	res, err = f.eng.Retry(f.ctx, engine.Redo{Job: queued, By: events.ActorAPI})
	require.NoError(t, err)
	require.Equal(t, queued, res.RetryOf)
	j := f.job(t, res.JobID)
	require.Equal(t, queued, j.RetryOf)
	require.Equal(t, events.ActorAPI, j.SubmittedBy)
	require.Equal(t, 7, j.MaxAttempts, "the config's budget")

	again, err := f.eng.Retry(f.ctx, engine.Redo{Job: queued, By: events.ActorAPI})
	require.ErrorIs(t, err, commands.ErrAlreadyRetried)
	require.Equal(t, res.JobID, again.Old.RetriedAs, "the job as it is now")

	_, err = f.eng.Cancel(f.ctx, engine.Cancel{Job: res.JobID, By: events.ActorCLI})
	require.NoError(t, err)
	require.NoError(t, os.Chmod(f.run, 0o644))
	head = f.head(t)
	_, err = f.eng.Retry(f.ctx, engine.Redo{Job: res.JobID, By: events.ActorCLI, Check: true})
	require.ErrorIs(t, err, commands.ErrPluginUnrunnable)
	require.Equal(t, head, f.head(t))
}

// TestReplay: a finished job is replayed as a new job linked to it, any
// number of times; a queued one is refused, with Check before anything is
// appended and without it by the command.
func TestReplay(t *testing.T) {
	f := setup(t, nil)
	id := f.queued(t)
	for _, check := range []bool{true, false} {
		res, err := f.eng.Replay(f.ctx, engine.Redo{Job: id, By: events.ActorCLI, Check: check})
		require.ErrorIs(t, err, commands.ErrInvalidTransition, "check %v", check)
		require.Equal(t, events.StatusQueued, res.Old.Status)
	}
	_, err := f.eng.Cancel(f.ctx, engine.Cancel{Job: id, By: events.ActorCLI})
	require.NoError(t, err)
	for range 2 {
		res, err := f.eng.Replay(f.ctx, engine.Redo{Job: id, By: events.ActorCLI, Check: true})
		require.NoError(t, err)
		require.Equal(t, id, res.ReplayOf)
		j := f.job(t, res.JobID)
		require.Equal(t, id, j.ReplayOf)
		require.Equal(t, 7, j.MaxAttempts)
	}
	require.Len(t, f.job(t, id).ReplayedAs, 2)
}
