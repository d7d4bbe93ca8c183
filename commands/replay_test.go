package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// replay is job-1's replay as the new job id, with 2 attempts of 10s backoff.
func replay(b *testBundle, id string) (commands.ReplayResult, error) {
	return commands.ReplayJob(b.ctx, b.l, commands.Replay{JobID: jobID, NewJobID: id, Actor: events.ActorCLI,
		MaxAttempts: 2, BackoffBase: 10 * time.Second, Now: now})
}

// TestReplayJob: given a succeeded routed pipeline step with baggage, when
// replayed twice, then each replay appends, in one transaction, a new job
// with the old one's plugin, command, payload, event, context, parent and
// tree (no dedupe key, no pipeline position; replay_of), and job.replayed
// on the old job's stream, which does not change it otherwise.
func TestReplayJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := job(jobID, withKey("invoice-42"), func(e *events.Enqueued) {
		e.Plugin, e.Command, e.SubmittedBy = "greet", "handle", events.ActorRoute
		e.Payload = raw(`{"name":"Ada"}`)
		e.Event = raw(`{"type":"echo.poll","payload":{"name":"Ada"},"event_id":"ev-1","source":"echo","timestamp":"2026-03-01T11:00:00Z"}`)
		e.ParentJobID, e.SourceEventID, e.Depth, e.HookDepth = "root-0", "ev-1", 1, 1
		e.Context = raw(`{"web":{"url":"https://example.com"}}`)
		e.Pipeline = &events.PipelineStep{Run: "run-1", Pipeline: "p", Hash: "h", Node: "0"}
	})
	s.corr = "root-0"
	s.evs[0].Meta.CorrelationID = "root-0"
	b.given(t, s.started(1).succeeded(1).events()...)
	mark := b.mark(t)

	res, err := replay(b, "job-2")
	require.NoError(t, err)
	require.Equal(t, commands.ReplayResult{JobID: "job-2", ReplayOf: jobID, Seq: mark + 1}, res)
	got := b.since(t, mark)
	requireEvents(t, []want{
		{Stream: "job/job-2", Version: 1, Type: events.JobEnqueued,
			Data: `{"job_id":"job-2","plugin":"greet","command":"handle","payload":{"name":"Ada"},"max_attempts":2,"backoff_base_ms":10000,` +
				`"submitted_by":"cli","parent_job_id":"root-0","source_event_id":"ev-1",` +
				`"event":{"type":"echo.poll","payload":{"name":"Ada"},"event_id":"ev-1","source":"echo","timestamp":"2026-03-01T11:00:00Z"},` +
				`"depth":1,"context":{"web":{"url":"https://example.com"}},"replay_of":"job-1","hook_depth":1}`,
			Meta: `{"correlation_id":"root-0","actor":"cli"}`},
		{Stream: jobStreamName, Version: 4, Type: events.JobReplayed, Data: `{"replay_job_id":"job-2"}`,
			Meta: `{"correlation_id":"root-0","actor":"cli"}`},
	}, got)
	requireOneTransaction(t, []int64{mark + 1, mark + 2}, got)

	_, err = replay(b, "job-3")
	require.NoError(t, err, "a job may be replayed again")
	old := b.fold(t, jobID)
	require.Equal(t, events.StatusSucceeded, old.Status, "job.replayed does not change the old job")
	require.Equal(t, []string{"job-2", "job-3"}, old.ReplayedAs)
	j := b.fold(t, "job-2")
	require.Equal(t, events.StatusQueued, j.Status)
	require.Equal(t, jobID, j.ReplayOf)
	require.Nil(t, j.Pipeline, "one step: no pipeline successors")
}

// TestReplayJobStates: a dead or canceled job is replayed like a succeeded
// one; a job not finished yet, or none, is refused and nothing appended.
func TestReplayJobStates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		given string
		msg   string
		err   error
	}{
		{"dead", "", nil},
		{"canceled", "", nil},
		{"queued", "replay job: job job-1 is queued: cannot replay", commands.ErrInvalidTransition},
		{"running", "replay job: job job-1 is running: cannot replay", commands.ErrInvalidTransition},
		{"cancel_requested", "replay job: job job-1 is cancel_requested: cannot replay", commands.ErrInvalidTransition},
		{"missing", "replay job: job not found: job-1", commands.ErrJobNotFound},
	} {
		t.Run(tc.given, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tc.given != "missing" {
				b.given(t, givenStates[tc.given]().events()...)
			}
			mark := b.mark(t)
			_, err := replay(b, "job-2")
			if tc.err == nil {
				require.NoError(t, err)
				require.Equal(t, []string{"job-2"}, b.fold(t, jobID).ReplayedAs)
				return
			}
			require.ErrorIs(t, err, tc.err)
			require.EqualError(t, err, tc.msg)
			require.Empty(t, b.since(t, mark), "nothing appended")
		})
	}
}
