package commands_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

func withIdempotencyKey(key string) func(*commands.Enqueue) {
	return func(c *commands.Enqueue) { c.IdempotencyKey, c.TaskID, c.TraceID = key, "task-1", "trace-1" }
}

// Given a job enqueued with an idempotency key, when the key is given
// again within the window, then the answer is that job (even once it has
// ended) and nothing is appended; with another plugin or command it is an
// *IdempotencyConflictError; past the window, the key makes a new job.
func TestIdempotentEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark := b.mark(t)
	first, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k1")))
	require.NoError(t, err)
	require.False(t, first.Existing)
	got := b.since(t, mark)
	requireEvents(t, []want{
		{Stream: events.JobStream(first.JobID), Version: 1, Type: events.JobEnqueued,
			Data: `{"job_id":"` + first.JobID + `","plugin":"echo","command":"poll","max_attempts":4,"backoff_base_ms":30000,"submitted_by":"cli",` +
				`"task_id":"task-1","trace_id":"trace-1","idempotency_key":"k1"}`},
		{Stream: events.IdempotencyStream("k1"), Version: 1, Type: events.IdempotencyReserved,
			Data: `{"job_id":"` + first.JobID + `","plugin":"echo","command":"poll"}`},
	}, got)

	mark = b.mark(t)
	again, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k1")))
	require.NoError(t, err)
	require.Equal(t, commands.EnqueueResult{JobID: first.JobID, Existing: true}, again)
	require.Empty(t, b.since(t, mark))

	startAttempt(t, b, first.JobID)
	endAttempt(t, b, first.JobID, 1, outOK)
	ended, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k1")))
	require.NoError(t, err)
	require.Equal(t, first.JobID, ended.JobID, "an ended job still answers its key")
	require.True(t, ended.Existing)

	_, err = commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k1"), func(c *commands.Enqueue) { c.Command = "other" }))
	var conflict *commands.IdempotencyConflictError
	require.ErrorAs(t, err, &conflict)
	require.ErrorIs(t, err, commands.ErrIdempotencyConflict)
	require.Equal(t, first.JobID, conflict.JobID)
	_, err = commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k1"), func(c *commands.Enqueue) { c.Plugin = "other" }))
	require.ErrorIs(t, err, commands.ErrIdempotencyConflict)

	// The ledger's clock (setup) is in 2030: a day past it is past the window.
	late := time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)
	mark = b.mark(t)
	fresh, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k1"), func(c *commands.Enqueue) { c.Now = late }))
	require.NoError(t, err)
	require.False(t, fresh.Existing)
	require.NotEqual(t, first.JobID, fresh.JobID)
	got = b.since(t, mark)
	require.Len(t, got, 2)
	require.Equal(t, int64(2), got[1].Version, "the key's stream goes on")
	require.Equal(t, events.IdempotencyStream("k1"), got[1].Stream)

	short, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k2"), func(c *commands.Enqueue) { c.IdempotencyTTL = time.Second; c.Now = late }))
	require.NoError(t, err)
	again, err = commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("k2"), func(c *commands.Enqueue) { c.IdempotencyTTL = time.Second; c.Now = late.Add(time.Hour) }))
	require.NoError(t, err)
	require.NotEqual(t, short.JobID, again.JobID, "IdempotencyTTL is the window when set")
}

// Fifty concurrent enqueues with one key on one ledger make one job: every
// one is answered with it, one of them made it.
func TestIdempotentEnqueueConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 50
	results := make([]commands.EnqueueResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("same")))
		}()
	}
	wg.Wait()
	made := 0
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, results[0].JobID, results[i].JobID)
		if !results[i].Existing {
			made++
		}
	}
	require.Equal(t, 1, made)
	jobs := 0
	for _, ev := range b.since(t, 0) {
		if ev.Type == events.JobEnqueued {
			jobs++
		}
	}
	require.Equal(t, 1, jobs)
}

// A retry chain of three: each retry names its parent (retry_of), the
// chain's first job as its root, and its place in the chain; task and
// trace ids carry on.
func TestRetryChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withIdempotencyKey("chain"), func(c *commands.Enqueue) { c.MaxAttempts = 1 }))
	require.NoError(t, err)
	chain := []string{res.JobID}
	for range 2 {
		last := chain[len(chain)-1]
		startAttempt(t, b, last)
		endAttempt(t, b, last, 1, outFailed)
		r, err := commands.RetryJob(b.ctx, b.l, commands.Retry{JobID: last, MaxAttempts: 1, DefaultDedupeTTL: time.Hour, Now: now})
		require.NoError(t, err)
		chain = append(chain, r.JobID)
	}
	for i, id := range chain {
		j := b.fold(t, id)
		require.Equal(t, "task-1", j.TaskID)
		require.Equal(t, "trace-1", j.TraceID)
		if i == 0 {
			require.Empty(t, j.RootJobID, "the root is its own")
			require.Zero(t, j.RunAttempt)
			require.Equal(t, "chain", j.IdempotencyKey)
			continue
		}
		require.Equal(t, chain[0], j.RootJobID)
		require.Equal(t, chain[i-1], j.RetryOf)
		require.Equal(t, i+1, j.RunAttempt)
		require.Empty(t, j.IdempotencyKey, "a retry is a new run, not a network retry")
	}
}
