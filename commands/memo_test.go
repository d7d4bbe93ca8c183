package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// memoAndFold reads, in one decision, the job's memo (if any) and the job
// folded from its stream.
func memoAndFold(t *testing.T, b *testBundle, id string) (memo *commands.Job, folded *commands.Job) {
	t.Helper()
	_, err := b.l.Decide(b.ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		m, ok, err := ledger.Recall[*commands.Job](tx, events.JobStream(id))
		if err != nil {
			return nil, err
		}
		if ok {
			memo = m
		}
		evs, err := tx.ReadStream(events.JobStream(id))
		if err != nil {
			return nil, err
		}
		folded, err = commands.FoldJob(evs)
		return nil, err
	})
	require.NoError(t, err)
	return memo, folded
}

// The job an enqueue or a start leaves for the next decision is exactly the
// job its stream folds to, whatever the payload's spelling: encoding/json
// compacts it and escapes HTML characters when it stores the event. A
// string that is not valid UTF-8 would not come back as it went in: no memo.
func TestMemoizedJobIsTheFoldedJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(*commands.Enqueue)
		noMemo bool
	}{
		{"no payload", func(*commands.Enqueue) {}, false},
		{"spaced payload", func(c *commands.Enqueue) { c.Payload = raw(" {\n \"a\" : [1, 2.50, 1e3] ,\"b\":{} }\t") }, false},
		{"html and unicode", func(c *commands.Enqueue) {
			c.Payload = raw(`{"h":"<a href='x'>&amp;</a>","u":"é\u00e9\u2028 ☃","e":"\"\\/"}`)
		}, false},
		{"null payload", func(c *commands.Enqueue) { c.Payload = raw(`null`) }, false},
		{"given event", func(c *commands.Enqueue) {
			c.Event = raw(`{ "type" : "x.y", "payload" : {"k":"<v>"} }`)
			c.Payload = raw(`{"k":"<v>"}`)
		}, false},
		{"routed child", func(c *commands.Enqueue) {
			c.ParentJobID, c.SourceEventID, c.Correlation, c.DedupeKey = "p1", "e1", "root", "key <1>"
		}, false},
		{"invalid UTF-8 key", func(c *commands.Enqueue) { c.DedupeKey = "k\xff" }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(tc.edit))
			require.NoError(t, err)
			memo, folded := memoAndFold(t, b, res.JobID)
			if tc.noMemo {
				require.Nil(t, memo, "a job that does not fold as it went in was memoized")
				return
			}
			require.NotNil(t, memo, "the enqueue left no memo")
			require.Equal(t, folded, memo, "the enqueue's memo is not the folded job")

			st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Now: now})
			require.NoError(t, err)
			memo, folded = memoAndFold(t, b, res.JobID)
			require.NotNil(t, memo, "the start left no memo")
			require.Equal(t, folded, memo, "the start's memo is not the folded job")
			require.Equal(t, folded, st.Job, "the started job is not the folded job")

			_, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: res.JobID, Attempt: 1, Now: now,
				Outcome: commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok"}`)}})
			require.NoError(t, err)
			// Its memo is not returned: stale once the stream moved on, whether
			// or not the completion forgot it (Forget, which frees the table's
			// room, is proven in the ledger's memo tests).
			memo, _ = memoAndFold(t, b, res.JobID)
			require.Nil(t, memo, "a finished job's stale memo was still returned")
		})
	}
}

// A completion takes the job from the memo its start left while the stream
// has not moved: a correlation only the memo carries shows it was used.
// Once a cancel request has moved the stream, the completion folds it, and
// a failed attempt is canceled (the stale running job would have been
// retried).
func TestCompleteUsesTheMemoOnlyWhileCurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("k1").events()...)
	b.given(t, job("k2").events()...)
	ok := commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok"}`)}

	st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: "k1", Timeout: time.Minute, Now: now})
	require.NoError(t, err)
	marked := *st.Job
	marked.Correlation = "from-memo"
	_, err = b.l.Decide(b.ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		ledger.Remember(tx, events.JobStream("k1"), st.Version, &marked, 0)
		return nil, nil
	})
	require.NoError(t, err)
	mark := b.mark(t)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "k1", Attempt: 1, Now: now, Outcome: ok})
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, res.Status)
	got := b.since(t, mark)
	require.Len(t, got, 1, "events: %s", describe(got))
	require.Equal(t, events.JobSucceeded, got[0].Type)
	require.JSONEq(t, `{"correlation_id":"from-memo","actor":"dispatcher"}`, string(got[0].Meta), "the memo was not used")

	st, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: "k2", Timeout: time.Minute, Now: now})
	require.NoError(t, err)
	b.given(t, ledger.NewEvent{Stream: events.JobStream("k2"), ExpectedVersion: st.Version, Type: events.JobCancelRequested,
		Data: events.Canceled{Attempt: 1, Reason: "stop"}, Meta: ledger.Meta{CorrelationID: "k2"}})
	failed := commands.Outcome{Kind: events.OutcomeError, Retryable: true, Error: "boom"}
	res, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "k2", Attempt: 1, Now: now, Outcome: failed})
	require.NoError(t, err)
	require.Equal(t, events.StatusCanceled, res.Status, "the stale memo was used")
	require.Equal(t, events.StatusCanceled, b.fold(t, "k2").Status)
}
