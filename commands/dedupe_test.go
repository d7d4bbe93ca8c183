package commands_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// keyed is a job of echo poll holding dedupe key k.
func keyed(id string, edit ...func(*events.Enqueued)) *jobStream {
	return job(id, append([]func(*events.Enqueued){withKey("k")}, edit...)...)
}

func target(plugin, command string) func(*events.Enqueued) {
	return func(e *events.Enqueued) { e.Plugin, e.Command = plugin, command }
}

// TestDedupe is spec §3.6 with the window of 24h and per-target scope
// (plugin + command + key): given jobs holding the key, when a new job for
// echo poll with key k is enqueued, then it is dropped as a duplicate of
// the job named, or enqueued.
func TestDedupe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		given    []*jobStream
		ttl      time.Duration // the per-enqueue override
		existing string        // "" means enqueued
	}{
		{name: "succeeded an hour ago", existing: "old",
			given: []*jobStream{keyed("old").started(1).endedAt(-time.Hour).succeeded(1)}},
		{name: "succeeded just inside the window", existing: "old",
			given: []*jobStream{keyed("old").started(1).endedAt(-24*time.Hour + time.Nanosecond).succeeded(1)}},
		{name: "succeeded exactly a window ago",
			given: []*jobStream{keyed("old").started(1).endedAt(-24 * time.Hour).succeeded(1)}},
		{name: "succeeded 25h ago",
			given: []*jobStream{keyed("old").started(1).endedAt(-25 * time.Hour).succeeded(1)}},
		{name: "the latest success is named", existing: "newer",
			given: []*jobStream{
				keyed("old").started(1).endedAt(-2 * time.Hour).succeeded(1),
				keyed("newer").started(1).endedAt(-time.Hour).succeeded(1),
				keyed("older").started(1).endedAt(-3 * time.Hour).succeeded(1),
				keyed("oldest").started(1).endedAt(-4 * time.Hour).succeeded(1),
			}},
		{name: "an override narrows the window", ttl: time.Hour,
			given: []*jobStream{keyed("old").started(1).endedAt(-2 * time.Hour).succeeded(1)}},
		{name: "a success within the override", ttl: time.Hour, existing: "old",
			given: []*jobStream{keyed("old").started(1).endedAt(-30 * time.Minute).succeeded(1)}},
		{name: "an override wider than the default", ttl: 48 * time.Hour, existing: "old",
			given: []*jobStream{keyed("old").started(1).endedAt(-30 * time.Hour).succeeded(1)}},

		{name: "queued, with an override", ttl: time.Minute, existing: "inflight",
			given: []*jobStream{keyed("inflight")}},
		{name: "running, with an override", ttl: time.Minute, existing: "inflight",
			given: []*jobStream{keyed("inflight").started(1)}},
		{name: "waiting for a retry, with an override", ttl: time.Minute, existing: "inflight",
			given: []*jobStream{keyed("inflight").started(1).failed(1, "boom").retry(2, at(time.Minute))}},
		{name: "the oldest in-flight job is named", ttl: time.Minute, existing: "first",
			given: []*jobStream{keyed("done").started(1).endedAt(-time.Second).succeeded(1), keyed("first"), keyed("second").started(1)}},
		{name: "queued, without an override",
			given: []*jobStream{keyed("inflight")}},
		{name: "running, without an override",
			given: []*jobStream{keyed("inflight").started(1)}},

		{name: "dead frees the key", ttl: time.Minute,
			given: []*jobStream{keyed("old").started(1).failed(1, "boom").endedAt(-time.Second).dead(1, "boom")}},
		{name: "canceled frees the key", ttl: time.Minute,
			given: []*jobStream{keyed("old").endedAt(-time.Second).canceled(1)}},
		{name: "dead frees the key, without an override",
			given: []*jobStream{keyed("old").started(1).failed(1, "boom").endedAt(-time.Second).dead(1, "boom")}},

		{name: "another plugin's key is not a duplicate", ttl: time.Minute,
			given: []*jobStream{keyed("other", target("fetch", "poll")), keyed("done", target("fetch", "poll")).started(1).succeeded(1)}},
		{name: "another command's key is not a duplicate", ttl: time.Minute,
			given: []*jobStream{keyed("other", target("echo", "handle")), keyed("done", target("echo", "handle")).started(1).succeeded(1)}},
		{name: "another key is not a duplicate", ttl: time.Minute,
			given: []*jobStream{job("other", withKey("k2")), job("done", withKey("k2")).started(1).succeeded(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, s := range tc.given {
				b.given(t, s.events()...)
			}
			dedupe := events.DedupeStream("echo", "poll", "k")
			version, err := streamVersion(b, dedupe)
			require.NoError(t, err)
			mark := b.mark(t)

			res, err := commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) {
				c.JobID, c.DedupeKey, c.DedupeTTL = "new", "k", tc.ttl
			}))

			require.NoError(t, err)
			if tc.existing != "" {
				require.Equal(t, commands.EnqueueResult{Deduped: true, ExistingJobID: tc.existing}, res)
				require.Empty(t, b.since(t, mark), "a duplicate appends nothing")
				return
			}
			require.Equal(t, commands.EnqueueResult{JobID: "new", Seq: mark + 1}, res)
			got := b.since(t, mark)
			require.Len(t, got, 2)
			require.Equal(t, "job/new", got[0].Stream)
			requireEvents(t, []want{{Stream: dedupe, Version: version + 1, Type: events.DedupeReserved, Data: `{"job_id":"new"}`}}, got[1:])
		})
	}
}

func streamVersion(b *testBundle, stream string) (int64, error) {
	evs, err := b.l.ReadStream(b.ctx, stream)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	return evs[len(evs)-1].Version, nil
}

// TestDedupeLifecycle: the key is held while the job runs, and free again
// once it is dead; a success then holds it for the window.
func TestDedupeLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	withTTL := func(c *commands.Enqueue) { c.DedupeKey, c.DedupeTTL = "k", time.Minute }

	first, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withTTL))
	require.NoError(t, err)
	require.False(t, first.Deduped)
	_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: first.JobID, Now: now})
	require.NoError(t, err)
	dup, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withTTL))
	require.NoError(t, err)
	require.Equal(t, commands.EnqueueResult{Deduped: true, ExistingJobID: first.JobID}, dup)

	_, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: first.JobID, Attempt: 1, Now: now,
		Outcome: commands.Outcome{Kind: events.OutcomeError, Error: "bad config", ExitCode: 78}})
	require.NoError(t, err)
	second, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withTTL))
	require.NoError(t, err)
	require.False(t, second.Deduped)
	require.NotEqual(t, first.JobID, second.JobID)

	_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: second.JobID, Now: now})
	require.NoError(t, err)
	_, err = commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: second.JobID, Attempt: 1, Outcome: outOK, Now: now})
	require.NoError(t, err)
	dup, err = commands.EnqueueJob(b.ctx, b.l, enqueue(withTTL, func(c *commands.Enqueue) { c.Now = now.Add(59 * time.Second) }))
	require.NoError(t, err)
	require.Equal(t, commands.EnqueueResult{Deduped: true, ExistingJobID: second.JobID}, dup)
	third, err := commands.EnqueueJob(b.ctx, b.l, enqueue(withTTL, func(c *commands.Enqueue) { c.Now = now.Add(time.Minute) }))
	require.NoError(t, err)
	require.False(t, third.Deduped)

	evs, err := b.l.ReadStream(b.ctx, events.DedupeStream("echo", "poll", "k"))
	require.NoError(t, err)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	require.Equal(t, []string{events.DedupeReserved, events.DedupeReleased, events.DedupeReserved, events.DedupeReleased, events.DedupeReserved}, types)
}

// TestDedupeConcurrentEnqueues: 50 enqueues race with one key and a TTL
// override; the decision runs inside the write transaction, so exactly one
// gets in and the other 49 name it. Run several times.
func TestDedupeConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
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
					results[i], errs[i] = commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) {
						c.DedupeKey, c.DedupeTTL = "k", time.Minute
					}))
				}()
			}
			wg.Wait()

			require.NoError(t, errors.Join(errs...))
			var winner string
			for _, r := range results {
				if !r.Deduped {
					require.Empty(t, winner, "a second job got in: %s", r.JobID)
					winner = r.JobID
				}
			}
			require.NotEmpty(t, winner)
			for _, r := range results {
				if r.Deduped {
					require.Equal(t, commands.EnqueueResult{Deduped: true, ExistingJobID: winner}, r)
				}
			}
			requireEvents(t, []want{
				{Stream: events.JobStream(winner), Version: 1, Type: events.JobEnqueued,
					Data: fmt.Sprintf(`{"job_id":%q,"plugin":"echo","command":"poll","max_attempts":4,"backoff_base_ms":30000,"submitted_by":"cli","dedupe_key":"k","dedupe_ttl_ms":60000}`, winner)},
				{Stream: "dedupe/echo/poll/k", Version: 1, Type: events.DedupeReserved, Data: fmt.Sprintf(`{"job_id":%q}`, winner)},
			}, b.since(t, 0))
		})
	}
}

// TestDedupeConcurrentEnqueuesWithoutOverride: without an override an
// in-flight job does not block, so all 50 get in, each reserving the key at
// the next version of its stream with no conflict.
func TestDedupeConcurrentEnqueuesWithoutOverride(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res commands.EnqueueResult
			res, errs[i] = commands.EnqueueJob(b.ctx, b.l, enqueue(func(c *commands.Enqueue) { c.DedupeKey = "k" }))
			if errs[i] == nil && res.Deduped {
				errs[i] = fmt.Errorf("deduped against %s", res.ExistingJobID)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	evs, err := b.l.ReadStream(b.ctx, "dedupe/echo/poll/k")
	require.NoError(t, err)
	require.Len(t, evs, n)
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Version)
	}
}
