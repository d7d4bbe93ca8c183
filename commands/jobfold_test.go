package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// loadAndFold reads, in one decision, the job as a command loads it
// (commands.LoadJob) and the job folded from its stream, and says whether
// the load came from the ledger's cache.
func loadAndFold(t *testing.T, b *testBundle, id string) (loaded, folded *commands.Job, cached bool) {
	t.Helper()
	before := b.l.WriteStats().FoldsCached
	_, err := b.l.Decide(b.ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		var err error
		if loaded, err = commands.LoadJob(tx, id); err != nil {
			return nil, err
		}
		evs, err := tx.ReadStream(events.JobStream(id))
		if err != nil {
			return nil, err
		}
		folded, err = commands.FoldJob(evs)
		return nil, err
	})
	require.NoError(t, err)
	return loaded, folded, b.l.WriteStats().FoldsCached > before
}

// A job's decisions take it from the ledger's fold cache, not from its
// stream, and it is exactly the job its stream folds to, whatever the
// payload's spelling (encoding/json compacts it and escapes HTML
// characters when it stores the event) or its strings (invalid UTF-8 comes
// back replaced).
func TestLoadedJobIsTheFoldedJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*commands.Enqueue)
	}{
		{"no payload", func(*commands.Enqueue) {}},
		{"spaced payload", func(c *commands.Enqueue) { c.Payload = raw(" {\n \"a\" : [1, 2.50, 1e3] ,\"b\":{} }\t") }},
		{"html and unicode", func(c *commands.Enqueue) {
			c.Payload = raw(`{"h":"<a href='x'>&amp;</a>","u":"é\u00e9\u2028 ☃","e":"\"\\/"}`)
		}},
		{"null payload", func(c *commands.Enqueue) { c.Payload = raw(`null`) }},
		{"given event", func(c *commands.Enqueue) {
			c.Event = raw(`{ "type" : "x.y", "payload" : {"k":"<v>"} }`)
			c.Payload = raw(`{"k":"<v>"}`)
		}},
		{"routed child", func(c *commands.Enqueue) {
			c.ParentJobID, c.SourceEventID, c.Correlation, c.DedupeKey = "p1", "e1", "root", "key <1>"
		}},
		{"invalid UTF-8 key", func(c *commands.Enqueue) { c.DedupeKey = "k\xff" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(tc.edit))
			require.NoError(t, err)
			stats := b.l.WriteStats()
			st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Now: now})
			require.NoError(t, err)
			require.Equal(t, stats.FoldsRead, b.l.WriteStats().FoldsRead, "the start read the job its enqueue appended")
			loaded, folded, cached := loadAndFold(t, b, res.JobID)
			require.True(t, cached, "the started job was not cached")
			require.Equal(t, folded, loaded, "the cached job is not the folded job")
			require.Equal(t, folded, st.Job, "the started job is not the folded job")

			err = commands.RecordStderr(b.ctx, b.l, commands.StderrLines{JobID: res.JobID, Attempt: 1, Line: 1, Lines: []events.StderrLine{{Text: "x"}}})
			require.NoError(t, err)
			stats = b.l.WriteStats()
			_, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: res.JobID, Attempt: 1, Now: now,
				Outcome: commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok"}`)}})
			require.NoError(t, err)
			require.Equal(t, stats.FoldsRead, b.l.WriteStats().FoldsRead, "the completion read the job its start left")
			loaded, folded, cached = loadAndFold(t, b, res.JobID)
			require.True(t, cached, "the completed job was not cached")
			require.Equal(t, folded, loaded, "the cached job is not the folded job")
		})
	}
}

// Once another process moved a job's stream on (a cancel request), the
// completion folds the stream again: a failed attempt is canceled (the
// stale running job would have been retried).
func TestCompleteFoldsAStreamAnotherProcessMoved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("k2").events()...)
	st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: "k2", Timeout: time.Minute, Now: now})
	require.NoError(t, err)
	other, err := ledger.Open(b.ctx, b.l.Path(), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	_, err = other.Append(b.ctx, ledger.NewEvent{Stream: events.JobStream("k2"), ExpectedVersion: st.Version, Type: events.JobCancelRequested,
		Data: events.Canceled{Attempt: 1, Reason: "stop"}, Meta: ledger.Meta{CorrelationID: "k2"}})
	require.NoError(t, err)
	require.NoError(t, other.Close())

	failed := commands.Outcome{Kind: events.OutcomeError, Retryable: true, Error: "boom"}
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "k2", Attempt: 1, Now: now, Outcome: failed})
	require.NoError(t, err)
	require.Equal(t, events.StatusCanceled, res.Status, "the stale job was used")
	require.Equal(t, events.StatusCanceled, b.fold(t, "k2").Status)
}
