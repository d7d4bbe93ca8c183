package ledger

import (
	"context"
	"errors"
	"time"
)

// ErrStopFollowing, returned by a Follow callback, ends the follow without an
// error: the caller has seen what it was waiting for.
var ErrStopFollowing = errors.New("stop following")

// followPage is how many events Follow reads in one read transaction.
const followPage = 1000

// followPageBytes ends a Follow page early once its events' data and meta
// reach this size: a page is held in memory while fn sees it, and a page of
// large events need not be a thousand of them.
const followPageBytes = 256 << 10

// followPoll is how often Follow looks again when this ledger has no watch
// on its file (Watching is false): other processes' appends then wake
// nothing, so it reads on a timer instead.
const followPoll = 200 * time.Millisecond

// errPageFull ends a page read at followPageBytes.
var errPageFull = errors.New("page full")

// followerConns is how many of a pool of n read connections followers may
// hold at once: never all of them, so the dispatcher, the projector and
// one-off reads always find one however many followers catch up at once.
func followerConns(n int) int { return max(1, n/2) }

// Follow calls fn for every event after seq after that matches f, oldest
// first, including events appended later by this process or another, until
// fn returns an error or ctx ends. It returns the seq of the last event fn
// accepted (returned nil for; after, if none), with nil when fn returned
// ErrStopFollowing, the context's error when ctx ended, and fn's or a read's
// error otherwise.
//
// It reads in pages and, once it has caught up, sleeps until Changed fires:
// it never polls (unless the ledger could not watch its file: then it looks
// every followPoll), and a follower that has seen everything costs nothing.
// fn runs on the caller's goroutine after a page is read and its connection
// given back, so a slow fn (a client that does not read its stream) holds no
// connection and slows only its own follow (back-pressure), never the
// writer or other readers. Followers share at most followerConns of the read
// pool. A filtered follow looks at each event of the log once, matching or
// not: its next read starts after the head its last one could see.
func (l *Ledger) Follow(ctx context.Context, after int64, f Filter, fn func(Event) error) (last int64, err error) {
	last = after
	// from is where the next read starts. A filtered read walks the log by
	// seq, so once a read has caught up, from moves to the head it could
	// see, past events that did not match: otherwise every wake-up would
	// walk again all that was appended since the last match.
	from := after
	var page []Event
	for {
		// Take the wake-up before reading, so an append that lands between
		// the read and the wait is never missed.
		changed := l.Changed()
		for {
			var caughtUp bool
			page, from, caughtUp, err = l.followPage(ctx, from, f, page[:0])
			if err != nil {
				if ctx.Err() != nil {
					return last, ctx.Err()
				}
				return last, err
			}
			for i, ev := range page {
				page[i] = Event{} // let the page's data go once seen
				err := fn(ev)
				switch {
				case errors.Is(err, ErrStopFollowing):
					return last, nil
				case err != nil && ctx.Err() != nil:
					return last, ctx.Err()
				case err != nil:
					return last, err
				}
				last = ev.Seq
			}
			if caughtUp {
				break
			}
		}
		if err := l.WaitChanged(ctx, changed); err != nil {
			return last, err
		}
	}
}

// followPage reads the next page of a follow into page: the events after
// from that match f, up to followPage of them or followPageBytes. It
// returns where the next read starts and whether this one caught up with
// the head. It holds a follower slot and a read connection only while it
// reads.
func (l *Ledger) followPage(ctx context.Context, from int64, f Filter, page []Event) (_ []Event, next int64, caughtUp bool, err error) {
	select {
	case l.followers <- struct{}{}:
	case <-ctx.Done():
		return page, from, false, ctx.Err()
	}
	defer func() { <-l.followers }()
	// Every event up to head is visible to the read that follows.
	var head int64
	if f != (Filter{}) {
		if head, err = l.LastSeq(ctx); err != nil {
			return page, from, false, err
		}
	}
	size := 0
	next, err = l.ReadFrom(ctx, from, followPage, f, func(ev Event) error {
		page = append(page, ev)
		if size += len(ev.Data) + len(ev.Meta); size >= followPageBytes {
			return errPageFull
		}
		return nil
	})
	switch {
	case errors.Is(err, errPageFull):
		return page, next, false, nil
	case err != nil:
		return page, from, false, err
	case len(page) < followPage:
		return page, max(next, head), true, nil
	}
	return page, next, false, nil
}

// WaitChanged waits until changed (a channel Changed returned, taken before
// the caller's read) is closed, or, when the ledger has no watch on its
// file (Watching is false), at most followPoll; it returns ctx's error if
// ctx ends first. It is how Follow, and any waiter that re-reads a view
// rather than events, sleeps between reads.
func (l *Ledger) WaitChanged(ctx context.Context, changed <-chan struct{}) error {
	var polled <-chan time.Time
	if !l.Watching() {
		poll := time.NewTimer(followPoll)
		defer poll.Stop()
		polled = poll.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-polled:
	}
	return ctx.Err()
}
