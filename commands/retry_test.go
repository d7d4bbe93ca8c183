package commands_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// retry is job-1's retry as the new job "job-2", with 2 attempts of 10s backoff.
func retry(b *testBundle) (commands.RetryResult, error) {
	return commands.RetryJob(b.ctx, b.l, commands.Retry{JobID: jobID, NewJobID: "job-2", Actor: events.ActorCLI,
		MaxAttempts: 2, BackoffBase: 10 * time.Second, DefaultDedupeTTL: 24 * time.Hour, Now: now})
}

// routedChild is a dead routed child of root-0 with a payload, an event and
// a dedupe key (released when it died), one hop from its root (a retry
// keeps its depth: the hop limit counts on from it).
func routedChild() *jobStream {
	s := job(jobID, withKey("invoice-42"), func(e *events.Enqueued) {
		e.Plugin, e.Command, e.SubmittedBy = "greet", "handle", events.ActorRoute
		e.Payload = raw(`{"name":"Ada"}`)
		e.Event = raw(`{"type":"echo.poll","payload":{"name":"Ada"},"event_id":"ev-1","source":"echo","timestamp":"2026-03-01T11:00:00Z"}`)
		e.ParentJobID, e.SourceEventID, e.DedupeTTLMS, e.Depth = "root-0", "ev-1", 60000, 1
	})
	s.corr = "root-0"
	s.evs[0].Meta.CorrelationID = "root-0"
	return s.started(1).failed(1, "boom").dead(1, "not retryable: boom")
}

// TestRetryJob: given a dead routed child, when retried, then one
// transaction appends the new job (the old one's plugin, command, payload,
// event, dedupe key, parent and tree; the given attempt budget; retry_of,
// and the retry chain: root job-1, attempt 2),
// its dedupe reservation, and job.retried on the old job's stream.
func TestRetryJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, routedChild().events()...)
	mark := b.mark(t)

	res, err := retry(b)
	require.NoError(t, err)
	require.Equal(t, commands.RetryResult{JobID: "job-2", RetryOf: jobID, Seq: mark + 1}, res)

	got := b.since(t, mark)
	requireEvents(t, []want{
		{Stream: "job/job-2", Version: 1, Type: events.JobEnqueued,
			Data: `{"job_id":"job-2","plugin":"greet","command":"handle","payload":{"name":"Ada"},"max_attempts":2,"backoff_base_ms":10000,` +
				`"submitted_by":"cli","dedupe_key":"invoice-42","dedupe_ttl_ms":60000,"parent_job_id":"root-0","source_event_id":"ev-1",` +
				`"event":{"type":"echo.poll","payload":{"name":"Ada"},"event_id":"ev-1","source":"echo","timestamp":"2026-03-01T11:00:00Z"},"retry_of":"job-1","depth":1,` +
				`"root_job_id":"job-1","run_attempt":2}`,
			Meta: `{"correlation_id":"root-0","actor":"cli"}`},
		{Stream: "dedupe/greet/handle/invoice-42", Version: 3, Type: events.DedupeReserved, Data: `{"job_id":"job-2"}`},
		{Stream: jobStreamName, Version: 5, Type: events.JobRetried, Data: `{"retry_job_id":"job-2"}`,
			Meta: `{"correlation_id":"root-0","actor":"cli"}`},
	}, got)
	requireOneTransaction(t, []int64{mark + 1, mark + 2, mark + 3}, got)

	old := b.fold(t, jobID)
	require.Equal(t, events.StatusDead, old.Status, "job.retried does not change the old job")
	require.Equal(t, "job-2", old.RetriedAs)
	require.Equal(t, events.StatusQueued, b.fold(t, "job-2").Status)
}

// TestRetryJobRefusals: only a dead or canceled job can be retried, and
// only once; a refusal appends nothing.
func TestRetryJobRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		given string
		msg   string
		err   error
	}{
		{"queued", "retry job: job job-1 is queued: cannot retry", commands.ErrInvalidTransition},
		{"running", "retry job: job job-1 is running: cannot retry", commands.ErrInvalidTransition},
		{"cancel_requested", "retry job: job job-1 is cancel_requested: cannot retry", commands.ErrInvalidTransition},
		{"succeeded", "retry job: job job-1 is succeeded: cannot retry", commands.ErrInvalidTransition},
		{"retried", "retry job: job job-1 was retried already, as job job-2", commands.ErrAlreadyRetried},
		{"missing", "retry job: job not found: job-1", commands.ErrJobNotFound},
	} {
		t.Run(tc.given, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			switch tc.given {
			case "retried":
				b.given(t, givenStates["dead"]().events()...)
				_, err := retry(b)
				require.NoError(t, err)
			case "missing":
			default:
				b.given(t, givenStates[tc.given]().events()...)
			}
			mark := b.mark(t)
			_, err := retry(b)
			require.ErrorIs(t, err, tc.err)
			require.EqualError(t, err, tc.msg)
			require.Empty(t, b.since(t, mark), "nothing appended")
		})
	}
}

// TestRetryJobOfACanceledJob: a canceled job is retried like a dead one.
func TestRetryJobOfACanceledJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, givenStates["canceled"]().events()...)
	res, err := retry(b)
	require.NoError(t, err)
	require.Equal(t, "job-2", res.JobID)
	require.Equal(t, "job-2", b.fold(t, jobID).RetriedAs)
}

// TestRetryJobDeduped: a retry whose dedupe key another job of the same
// target fulfilled within the window is dropped like any duplicate, and
// nothing records it as retried (it can be retried once that has passed).
func TestRetryJobDeduped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, routedChild().events()...)
	other := job("job-0", withKey("invoice-42"), func(e *events.Enqueued) { e.Plugin, e.Command = "greet", "handle" })
	b.given(t, other.started(1).endedAt(-10*time.Second).succeeded(1).events()...)
	mark := b.mark(t)

	res, err := retry(b)
	require.NoError(t, err)
	require.Equal(t, commands.RetryResult{RetryOf: jobID, Deduped: true, ExistingJobID: "job-0"}, res)
	require.Empty(t, b.since(t, mark), "nothing appended")
	require.Empty(t, b.fold(t, jobID).RetriedAs)
}

// TestEnqueuePayloadDepth: a payload nested deeper than the ledger stores is
// refused as too deep, with its depth, whether or not encoding/json could
// parse it (it gives up at 10,000 levels); the deepest that fits is stored.
func TestEnqueuePayloadDepth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	nested := func(n int) []byte { return []byte(strings.Repeat(`{"a":[`, n/2) + "1" + strings.Repeat("]}", n/2)) }

	res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.Payload = nested(commands.MaxPayloadDepth) }))
	require.NoError(t, err, "the deepest payload that fits, with its envelope built around it")
	require.Equal(t, events.StatusQueued, b.fold(t, res.JobID).Status)

	mark := b.mark(t)
	for _, depth := range []int{commands.MaxPayloadDepth + 2, 20000} {
		_, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.Payload = nested(depth) }))
		require.ErrorIs(t, err, commands.ErrInvalidCommand)
		require.ErrorContains(t, err, "payload nests "+strconv.Itoa(depth)+" levels deep; a payload may nest at most 500")
	}
	require.Empty(t, b.since(t, mark), "nothing appended")
}

// TestRetryJobOfAPipelineStep: given a dead pipeline step with baggage that
// a hook started, when retried, then the new job carries its context and
// hook depth but no pipeline position: it runs that one step.
func TestRetryJobOfAPipelineStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := job(jobID, func(e *events.Enqueued) {
		e.Plugin, e.Command, e.SubmittedBy = "greet", "handle", events.ActorPipeline
		e.Payload = raw(`{"name":"Ada"}`)
		e.Context = raw(`{"web":{"url":"https://example.com"}}`)
		e.HookDepth = 2
		e.Pipeline = &events.PipelineStep{Run: "run-1", Pipeline: "p", Hash: "h", Node: "0"}
	})
	b.given(t, s.started(1).failed(1, "boom").dead(1, "not retryable: boom").events()...)

	_, err := retry(b)
	require.NoError(t, err)
	j := b.fold(t, "job-2")
	require.JSONEq(t, `{"web":{"url":"https://example.com"}}`, string(j.Context))
	require.Equal(t, 2, j.HookDepth)
	require.Nil(t, j.Pipeline)
}
