package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Given a started job, when its plugin's stderr lines are recorded, then
// they are appended to its stream as job.stderr_written, the job is still
// cached (so its completion need not read its stream), and lines of an
// attempt that is over are refused.
func TestRecordStderr(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(*commands.Enqueue) {}))
	require.NoError(t, err)
	id := res.JobID
	_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, Now: now})
	require.NoError(t, err)
	mark := b.mark(t)
	lines := []events.StderrLine{{At: at(0), Text: "one"}, {At: at(time.Millisecond), Text: "two"}}
	require.NoError(t, commands.RecordStderr(b.ctx, b.l, commands.StderrLines{JobID: id, Attempt: 1, Line: 1, Lines: lines}))
	require.NoError(t, commands.RecordStderr(b.ctx, b.l, commands.StderrLines{JobID: id, Attempt: 1, Line: 3, Truncated: true}))
	requireEvents(t, []want{
		{Stream: events.JobStream(id), Version: 3, Type: events.JobStderrWritten,
			Data: `{"attempt":1,"line":1,"lines":[{"at":"` + at(0) + `","text":"one"},{"at":"` + at(time.Millisecond) + `","text":"two"}]}`},
		{Stream: events.JobStream(id), Version: 4, Type: events.JobStderrWritten, Data: `{"attempt":1,"line":3,"lines":[],"truncated":true}`},
	}, b.since(t, mark))
	loaded, folded, cached := loadAndFold(t, b, id)
	require.True(t, cached, "recording stderr left the job to be read again")
	require.Equal(t, folded, loaded)
	require.Equal(t, events.StatusRunning, folded.Status)

	err = commands.RecordStderr(b.ctx, b.l, commands.StderrLines{JobID: id, Attempt: 2, Line: 1, Lines: lines})
	require.ErrorIs(t, err, commands.ErrInvalidTransition, "not the running attempt")
	_, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: id, Attempt: 1, Now: now, Outcome: outOK})
	require.NoError(t, err)
	err = commands.RecordStderr(b.ctx, b.l, commands.StderrLines{JobID: id, Attempt: 1, Line: 4, Lines: lines})
	require.ErrorIs(t, err, commands.ErrInvalidTransition, "the attempt is over")
}
