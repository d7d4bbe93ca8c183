package dispatch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/queries"
)

// queue is the dispatcher's copy of what the job_queue projection said was
// queued at its last read, oldest first. It is read again only when the
// projector has applied something that can add candidates to it, when it
// ran dry, or when the plugins at their cap changed; starts and completions
// trim it in memory. The Dispatcher's mu guards it.
type queue struct {
	ready     []candidate // queued, not waiting for a retry, oldest first
	retries   []candidate // queued, waiting for a retry
	truncated bool        // ready was cut at the read's limit
	// runDry: free slots, but nothing eligible in a truncated cache: read
	// on past the cut at the next look.
	runDry bool
	// What the projector had applied when the cache was read: requeue
	// events (-1: read at the next look), job.enqueued events, and the
	// plugins at their cap then (JSON).
	requeuesSeen int64
	enqueuedSeen int64
	cappedSeen   string
	// cancelsSeen is how many job.cancel_requested events had been applied
	// at the last look for cancels of jobs this dispatcher runs.
	cancelsSeen int64
}

// requeueEvents put a job back in the queue at its old place in FIFO order,
// so they can add a candidate anywhere in the queue; a new job.enqueued only
// ever adds one after every job already queued.
var requeueEvents = []string{events.JobRetryScheduled, events.JobRecovered}

// cancelRequested is the event that asks a running job to stop.
const cancelRequested = events.JobCancelRequested

// forceRead makes the next look read the queue again.
func (q *queue) forceRead() { q.requeuesSeen = -1 }

// fill starts as many eligible jobs as there are free slots. It returns
// the earliest future retry time among queued jobs (zero if none).
func (d *Dispatcher) fill(ctx context.Context) (time.Time, error) {
	read, err := d.refresh(ctx)
	if err != nil {
		return time.Time{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.opts.Now()
	if until := d.runner.pause.until(); now.Before(until) {
		return until, nil // the ledger refused a start: look again then
	}
	var next time.Time
	started, skipped := false, false
	take := func(list []candidate) []candidate {
		kept := list[:0]
		for i, c := range list {
			if d.slots.free() == 0 && c.retryAt.IsZero() {
				// Every slot is taken and nothing further down waits for a
				// retry time: the rest stays as it is, unread.
				return append(kept, list[i:]...)
			}
			if d.slots.owned(c) {
				// Ours, still finishing, or the projection has not caught up
				// with its end: skip it, but keep it, since a retry may make it
				// a candidate again without another read.
				kept = append(kept, c)
				continue
			}
			if c.retryAt.After(now) {
				if next.IsZero() || c.retryAt.Before(next) {
					next = c.retryAt
				}
				kept = append(kept, c)
				continue
			}
			if d.slots.free() == 0 || d.slots.held(c) {
				skipped = skipped || d.slots.free() > 0
				kept = append(kept, c) // smart dequeue: others may still run
				continue
			}
			d.launch(c)
			started = true
		}
		return kept
	}
	q := &d.queue
	q.retries = take(q.retries)
	q.ready = take(q.ready)
	// Free slots, and eligible jobs may lie past the end of a truncated
	// cache: read again at the next wake-up.
	q.runDry = d.slots.free() > 0 && q.truncated && (skipped || !started)
	if q.runDry && (!skipped || !read) {
		// The cache ran out, or it was read before the exit that freed this
		// slot: read on at once. The wake-up that brought us here may have
		// been the last one for a while (the exited job's outcome may already
		// be projected), and a fresh read may find a job past the cut.
		// After a fresh read that only found jobs held back by running ones,
		// wait: the exit of one of those wakes the loop or hands its slot on.
		d.wake()
	}
	return next, nil
}

// refresh reads the queue again when the cache may be stale, and acts on
// new cancel requests for jobs this dispatcher runs. It reports whether it
// read the queue.
func (d *Dispatcher) refresh(ctx context.Context) (read bool, err error) {
	p := d.opts.Projector
	d.mu.Lock()
	q := &d.queue
	d.slots.settled(p.Checkpoint())
	var requeues int64
	for _, t := range requeueEvents {
		requeues += p.Seen(t)
	}
	enqueued := p.Seen(events.JobEnqueued)
	free := d.slots.free()
	capped := d.slots.cappedPlugins(d.remoteOnly())
	// A truncated cache already holds the oldest jobs: new ones queue behind
	// them and matter only once it runs dry.
	newJobs := enqueued != q.enqueuedSeen && !q.truncated
	readQueue := free > 0 && (requeues != q.requeuesSeen || newJobs || q.runDry || capped != q.cappedSeen)
	cancels := p.Seen(cancelRequested)
	checkCancels := len(d.slots.running) > 0 && cancels != q.cancelsSeen
	// Read past the jobs we own or are settling, plus room to skip capped plugins.
	limit := int64(free + len(d.slots.running) + len(d.slots.settling) + 256)
	d.mu.Unlock()
	if !readQueue && !checkCancels {
		return false, nil
	}
	var ready, retries []candidate
	var canceled []string
	err = d.runner.ledger.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		if readQueue {
			var readErr error
			if ready, retries, readErr = readCandidates(conn, capped, limit); readErr != nil {
				return readErr
			}
		}
		if !checkCancels {
			return nil
		}
		return queries.ListCancelRequested(conn, func(id string) error {
			canceled = append(canceled, id)
			return nil
		})
	})
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if checkCancels {
		q.cancelsSeen = cancels // only once read: a failed read is tried again
	}
	if readQueue {
		q.ready, q.retries, q.runDry = ready, retries, false
		q.requeuesSeen, q.enqueuedSeen, q.cappedSeen = requeues, enqueued, capped
		q.truncated = int64(len(ready)) == limit
	}
	for _, id := range canceled {
		d.slots.cancel(id, errCanceledByUser)
	}
	return readQueue, nil
}

// readCandidates reads the jobs ready to run (leaving out the plugins in
// capped, a JSON array), oldest first, up to limit, and those waiting for a
// retry.
func readCandidates(conn *sqlite.Conn, capped string, limit int64) (ready, retries []candidate, err error) {
	err = queries.ListReadyJobs(conn, queries.ListReadyJobsParams{CappedPlugins: capped, MaxJobs: limit}, func(r queries.ListReadyJobsRow) error {
		ready = append(ready, candidate{id: r.ID, seq: r.Seq, plugin: r.Plugin, command: r.Command, dedupeKey: deref(r.DedupeKey), traceID: deref(r.TraceID)})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	err = queries.ListWaitingRetries(conn, func(r queries.ListWaitingRetriesRow) error {
		at, err := time.Parse(time.RFC3339Nano, deref(r.NextRetryAt))
		if err != nil {
			return fmt.Errorf("job %s: next_retry_at: %w", r.ID, err)
		}
		retries = append(retries, candidate{id: r.ID, seq: r.Seq, plugin: r.Plugin, command: r.Command, dedupeKey: deref(r.DedupeKey), retryAt: at, traceID: deref(r.TraceID)})
		return nil
	})
	return ready, retries, err
}

// pickLocked takes the oldest job in the cache that may start now out of
// it, by the rules fill applies. Called with d.mu held.
func (d *Dispatcher) pickLocked(now time.Time) (candidate, bool) {
	if d.slots.free() == 0 || now.Before(d.runner.pause.until()) {
		return candidate{}, false
	}
	for _, list := range []*[]candidate{&d.queue.retries, &d.queue.ready} {
		for i, c := range *list {
			if d.slots.owned(c) || c.retryAt.After(now) || d.slots.held(c) {
				continue
			}
			*list = slices.Delete(*list, i, i+1)
			return c, true
		}
	}
	return candidate{}, false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
