package commands_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// enqueue is a valid command to edit.
func enqueue(edit ...func(*commands.Enqueue)) commands.Enqueue {
	cmd := commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorCLI, MaxAttempts: 4,
		BackoffBase: 30 * time.Second, DefaultDedupeTTL: 24 * time.Hour, Now: now}
	for _, e := range edit {
		e(&cmd)
	}
	return cmd
}

func TestEnqueueValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*commands.Enqueue)
		msg  string
	}{
		{"no plugin", func(c *commands.Enqueue) { c.Plugin = "" }, "plugin is required"},
		{"no command", func(c *commands.Enqueue) { c.Command = "" }, "command is required"},
		{"max_attempts 0", func(c *commands.Enqueue) { c.MaxAttempts = 0 }, "max_attempts must be at least 1"},
		{"max_attempts negative", func(c *commands.Enqueue) { c.MaxAttempts = -1 }, "max_attempts must be at least 1"},
		{"no submitter", func(c *commands.Enqueue) { c.SubmittedBy = "" }, "submitted_by is required"},
		{"negative dedupe TTL", func(c *commands.Enqueue) { c.DedupeKey, c.DedupeTTL = "k", -time.Second }, "dedupe TTL must not be negative"},
		{"payload not JSON", func(c *commands.Enqueue) { c.Payload = raw(`{"a":`) }, "payload is not valid JSON"},
	}
	b := setup(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := commands.EnqueueJob(b.ctx, b.l, enqueue(tc.edit))
			require.ErrorIs(t, err, commands.ErrInvalidCommand)
			require.EqualError(t, err, "enqueue job: invalid command: "+tc.msg)
		})
	}
	require.Empty(t, b.since(t, 0), "nothing appended")
}

// TestEnqueueAssignsUUIDv7: ids are assigned, unique and time-ordered.
func TestEnqueueAssignsUUIDv7(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var prev string
	for i := range 3 {
		res, err := commands.EnqueueJob(b.ctx, b.l, enqueue())
		require.NoError(t, err)
		require.False(t, res.Deduped)
		u, err := uuid.Parse(res.JobID)
		require.NoError(t, err)
		require.Equal(t, uuid.Version(7), u.Version())
		require.Greater(t, res.JobID, prev)
		prev = res.JobID
		require.Equal(t, int64(i+1), res.Seq, "the seq of job.enqueued")
	}
}

func TestEnqueueEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  commands.Enqueue
		want []want
	}{
		{
			name: "minimal: no payload, no envelope",
			cmd:  enqueue(func(c *commands.Enqueue) { c.JobID = "j1" }),
			want: []want{{Stream: "job/j1", Version: 1, Type: events.JobEnqueued,
				Data: `{"job_id":"j1","plugin":"echo","command":"poll","max_attempts":4,"backoff_base_ms":30000,"submitted_by":"cli"}`,
				Meta: `{"correlation_id":"j1","actor":"cli"}`}},
		},
		{
			name: "the envelope is built from the payload",
			cmd: enqueue(func(c *commands.Enqueue) {
				c.JobID, c.Command, c.SubmittedBy, c.Payload, c.Causation = "j1", "handle", events.ActorWebhook, raw(`{ "n" : 1 }`), "req-7"
			}),
			want: []want{{Stream: "job/j1", Version: 1, Type: events.JobEnqueued,
				Data: `{"job_id":"j1","plugin":"echo","command":"handle","payload":{"n":1},"max_attempts":4,"backoff_base_ms":30000,"submitted_by":"webhook",
					"event":{"type":"ductile.webhook","payload":{"n":1},"event_id":"j1","source":"webhook","timestamp":"2026-03-01T12:00:00Z"}}`,
				Meta: `{"correlation_id":"j1","causation_id":"req-7","actor":"webhook"}`}},
		},
		{
			name: "a given envelope is kept",
			cmd: enqueue(func(c *commands.Enqueue) {
				c.JobID, c.Command, c.Payload = "j1", "handle", raw(`{"n":1}`)
				c.Event = raw(`{"type":"rss.item","payload":{"n":1},"event_id":"ev-1","source":"rss","timestamp":"2026-02-28T00:00:00Z"}`)
			}),
			want: []want{{Stream: "job/j1", Version: 1, Type: events.JobEnqueued,
				Data: `{"job_id":"j1","plugin":"echo","command":"handle","payload":{"n":1},"max_attempts":4,"backoff_base_ms":30000,"submitted_by":"cli",
					"event":{"type":"rss.item","payload":{"n":1},"event_id":"ev-1","source":"rss","timestamp":"2026-02-28T00:00:00Z"}}`}},
		},
		{
			name: "a child carries its tree's correlation and its parent",
			cmd: enqueue(func(c *commands.Enqueue) {
				c.JobID, c.SubmittedBy, c.Correlation, c.ParentJobID, c.SourceEventID, c.Causation = "j2", events.ActorRoute, "root-1", "j1", "ev-1", "ev-1"
			}),
			want: []want{{Stream: "job/j2", Version: 1, Type: events.JobEnqueued,
				Data: `{"job_id":"j2","plugin":"echo","command":"poll","max_attempts":4,"backoff_base_ms":30000,"submitted_by":"route","parent_job_id":"j1","source_event_id":"ev-1"}`,
				Meta: `{"correlation_id":"root-1","causation_id":"ev-1","actor":"route"}`}},
		},
		{
			name: "a dedupe key is reserved in the same append",
			cmd: enqueue(func(c *commands.Enqueue) {
				c.JobID, c.DedupeKey, c.DedupeTTL = "j1", "feed-42", 90*time.Second
			}),
			want: []want{
				{Stream: "job/j1", Version: 1, Type: events.JobEnqueued,
					Data: `{"job_id":"j1","plugin":"echo","command":"poll","max_attempts":4,"backoff_base_ms":30000,"submitted_by":"cli","dedupe_key":"feed-42","dedupe_ttl_ms":90000}`},
				{Stream: "dedupe/echo/poll/feed-42", Version: 1, Type: events.DedupeReserved, Data: `{"job_id":"j1"}`,
					Meta: `{"correlation_id":"j1","actor":"cli"}`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			res, err := commands.EnqueueJob(b.ctx, b.l, tc.cmd)

			require.NoError(t, err)
			require.Equal(t, commands.EnqueueResult{JobID: tc.cmd.JobID, Seq: 1}, res)
			got := b.since(t, 0)
			requireEvents(t, tc.want, got)
			for _, ev := range got {
				require.Equal(t, got[0].RecordedAt, ev.RecordedAt, "one transaction")
			}
			j := b.fold(t, tc.cmd.JobID)
			require.Equal(t, events.StatusQueued, j.Status)
			require.Equal(t, 1, j.Attempt)
		})
	}
}

// TestEnqueueRootCorrelation: a root job with an assigned id is its own
// correlation, and the built envelope's event_id is that id.
func TestEnqueueRootCorrelation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.Payload = raw(`{}`) }))
	require.NoError(t, err)
	evs := b.since(t, 0)
	require.Len(t, evs, 1)
	require.JSONEq(t, fmt.Sprintf(`{"correlation_id":%q,"actor":"cli"}`, res.JobID), string(evs[0].Meta))
	var enq events.Enqueued
	require.NoError(t, json.Unmarshal(evs[0].Data, &enq))
	var env struct {
		EventID string `json:"event_id"`
	}
	require.NoError(t, json.Unmarshal(enq.Event, &env))
	require.Equal(t, res.JobID, env.EventID)
	require.Equal(t, res.JobID, b.fold(t, res.JobID).Correlation)
}

// TestEnqueueSameIDTwice: a job id is taken once.
func TestEnqueueSameIDTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.JobID = "j1" }))
	require.NoError(t, err)
	mark := b.mark(t)
	_, err = commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.JobID = "j1" }))
	require.ErrorIs(t, err, ledger.ErrVersionConflict)
	require.ErrorContains(t, err, "stream job/j1: expected version 0, found 1")
	require.Empty(t, b.since(t, mark))
}
