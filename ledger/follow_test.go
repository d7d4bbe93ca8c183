package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
)

// TestFollowSeesEveryMatchingEventOnceInOrder: a follower started before,
// during and after appends (its own ledger's, and another Ledger's on the
// same file standing in for another process) is given every matching event
// exactly once, in seq order, across page boundaries, and ends when its
// callback says so.
func TestFollowSeesEveryMatchingEventOnceInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{Synchronous: "NORMAL"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := ledger.Open(ctx, b.path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer other.Close()

	const before, total = 1500, 2600 // more than a page already there
	appendOne := func(l *ledger.Ledger, i int) {
		stream := fmt.Sprintf("job/%d", i%3) // job/1 gets every third event
		_, err := l.Append(ctx, ledger.NewEvent{Stream: stream, ExpectedVersion: ledger.AnyVersion, Type: "test.appended", Data: map[string]int{"i": i}})
		require.NoError(t, err)
	}
	for i := range before {
		appendOne(b.l, i)
	}

	type seen struct{ all, filtered []int64 }
	follow := func(f ledger.Filter, want int, out *[]int64) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := other.Follow(ctx, 0, f, func(ev ledger.Event) error {
				*out = append(*out, ev.Seq)
				if len(*out) == want {
					return ledger.ErrStopFollowing
				}
				return nil
			})
			done <- err
		}()
		return done
	}
	var s seen
	wantFiltered := 0
	for i := range total {
		if i%3 == 1 {
			wantFiltered++
		}
	}
	allDone := follow(ledger.Filter{}, total, &s.all)
	filteredDone := follow(ledger.Filter{Stream: "job/1"}, wantFiltered, &s.filtered)
	for i := before; i < total; i++ {
		l := b.l
		if i%2 == 0 {
			l = other
		}
		appendOne(l, i)
	}
	require.NoError(t, <-allDone)
	require.NoError(t, <-filteredDone)

	require.Len(t, s.all, total)
	for i, seq := range s.all {
		require.Equal(t, int64(i+1), seq, "every event once, in seq order")
	}
	require.Len(t, s.filtered, wantFiltered)
	for i, seq := range s.filtered {
		require.Equal(t, int64(3*i+2), seq, "every event of job/1 once, in seq order")
	}
}

// Followers whose callbacks wait (a client that does not read its stream)
// hold no read connection meanwhile: eight of them on a pool of four leave
// the pool to other reads.
func TestFollowersHoldNoConnectionWhileTheirCallbackWaits(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{Synchronous: "NORMAL", ReadConns: 4})
	for i := range 10 {
		_, err := b.l.Append(context.Background(), ledger.NewEvent{Stream: fmt.Sprintf("x/%d", i), Type: "test.appended"})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	const followers = 8
	waiting := make(chan struct{}, followers)
	done := make(chan struct{}, followers)
	for i := range followers {
		f := ledger.Filter{}
		if i%2 == 1 {
			f.Stream = "x/3"
		}
		go func() {
			defer func() { done <- struct{}{} }()
			_, _ = b.l.Follow(ctx, 0, f, func(ledger.Event) error {
				waiting <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			})
		}()
	}
	for range followers {
		<-waiting
	}
	readCtx, readCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer readCancel()
	_, err := b.l.LastSeq(readCtx)
	require.NoError(t, err, "followers waiting in their callbacks hold the read pool")
	cancel()
	for range followers {
		<-done
	}
}

// A follow of large events reads them in pages bounded by size as well as
// count, and still sees every event once, in order.
func TestFollowPagesLargeEventsBySize(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{Synchronous: "NORMAL"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := strings.Repeat("y", 100<<10)
	const total = 30 // about 3 MB: a dozen size-bounded pages
	for i := range total {
		_, err := b.l.Append(ctx, ledger.NewEvent{Stream: fmt.Sprintf("big/%d", i%2), ExpectedVersion: ledger.AnyVersion, Type: "test.big", Data: map[string]string{"big": big}})
		require.NoError(t, err)
	}
	for _, f := range []ledger.Filter{{}, {Stream: "big/1"}} {
		var seqs []int64
		want := total
		if f.Stream != "" {
			want = total / 2
		}
		_, err := b.l.Follow(ctx, 0, f, func(ev ledger.Event) error {
			seqs = append(seqs, ev.Seq)
			if len(seqs) == want {
				return ledger.ErrStopFollowing
			}
			return nil
		})
		require.NoError(t, err)
		for i, seq := range seqs {
			if f.Stream == "" {
				require.Equal(t, int64(i+1), seq)
			} else {
				require.Equal(t, int64(2*i+2), seq)
			}
		}
	}
}

// TestFollowEndsWithItsContextOrItsCallback: a follower with nothing to read
// returns only when its context ends, with the context's error; a callback's
// error ends it with that error and the seq of the last event it accepted.
func TestFollowEndsWithItsContextOrItsCallback(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{Synchronous: "NORMAL"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.l.Follow(ctx, 0, ledger.Filter{}, func(ledger.Event) error { return nil })
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "a follower with nothing to read waits for its context")

	bg := context.Background()
	for i := range 3 {
		_, err := b.l.Append(bg, ledger.NewEvent{Stream: "s", ExpectedVersion: int64(i), Type: "test.appended"})
		require.NoError(t, err)
	}
	boom := errors.New("boom")
	last, err := b.l.Follow(bg, 0, ledger.Filter{}, func(ev ledger.Event) error {
		if ev.Seq == 3 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, int64(2), last, "the last event the callback accepted")
}

// TestFilteredFollowMissesNothingBesideBusyWriters: a follower filtered by
// stream, and one by type, woken over and over by events that do not match
// (which its next read starts after), are given every matching event once,
// in order, while two writers (this process and another Ledger on the file)
// append at once, each matching event right after non-matching ones.
func TestFilteredFollowMissesNothingBesideBusyWriters(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{Synchronous: "NORMAL"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := ledger.Open(ctx, b.path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer other.Close()

	const perWriter, every = 400, 7 // each writer: every 7th event matches
	follow := func(f ledger.Filter, out *[]int64) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := b.l.Follow(ctx, 0, f, func(ev ledger.Event) error {
				*out = append(*out, ev.Seq)
				if len(*out) == 2*(perWriter/every) {
					return ledger.ErrStopFollowing
				}
				return nil
			})
			done <- err
		}()
		return done
	}
	var byStream, byType []int64
	streamDone := follow(ledger.Filter{Stream: "wanted"}, &byStream)
	typeDone := follow(ledger.Filter{Type: "test.wanted"}, &byType)

	var wg sync.WaitGroup
	for w, l := range []*ledger.Ledger{b.l, other} {
		wg.Go(func() {
			for i := 1; i <= perWriter; i++ {
				e := ledger.NewEvent{Stream: fmt.Sprintf("noise/%d", w), ExpectedVersion: ledger.AnyVersion, Type: "test.noise"}
				if i%every == 0 {
					e.Stream, e.Type = "wanted", "test.wanted"
				}
				if _, err := l.Append(ctx, e); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, <-streamDone)
	require.NoError(t, <-typeDone)

	var want []int64
	_, err = b.l.ReadFrom(ctx, 0, 10000, ledger.Filter{Stream: "wanted"}, func(ev ledger.Event) error {
		want = append(want, ev.Seq)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, want, 2*(perWriter/every))
	require.Equal(t, want, byStream, "every event of the stream once, in seq order")
	require.Equal(t, want, byType, "every event of the type once, in seq order")
}

// BenchmarkFollowWaitingBesideABusyLog is a filtered follower waiting for
// events that come rarely (as plugin run --wait waits for its job's next
// event) while 5 000 others are appended between two of them, in 100
// appends that each wake it: each op is the time from the append of the
// event it waits for to its delivery, which must not grow with what was
// appended while it waited.
func BenchmarkFollowWaitingBesideABusyLog(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), ledger.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	got := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := l.Follow(ctx, 0, ledger.Filter{Stream: "wanted"}, func(ledger.Event) error {
			got <- struct{}{}
			return nil
		})
		done <- err
	}()
	var noise int64
	for i := range b.N {
		b.StopTimer()
		for range 100 {
			batch := make([]ledger.NewEvent, 50)
			for j := range batch {
				batch[j] = ledger.NewEvent{Stream: "noise", ExpectedVersion: noise, Type: "test.noise"}
				noise++
			}
			if _, err := l.Append(ctx, batch...); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if _, err := l.Append(ctx, ledger.NewEvent{Stream: "wanted", ExpectedVersion: int64(i), Type: "test.wanted"}); err != nil {
			b.Fatal(err)
		}
		<-got
	}
	b.StopTimer()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
}
