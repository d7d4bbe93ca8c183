package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests observe the syncer's order of fsync and answer directly.
// TestCrashLosesNoAcknowledgedAppend cannot: a SIGKILL leaves the WAL's
// written pages in the page cache, so it passes even if nothing is ever
// fsynced. Only the order proves the promise that an answered durable
// append survives a power cut.

// openObserved opens a ledger (synchronous=FULL: the syncer runs) whose WAL
// fsyncs go through observe(l, wal); observe must call wal.Sync itself.
func openObserved(t *testing.T, observe func(l *Ledger, wal *os.File) error) *Ledger {
	t.Helper()
	var opened atomic.Pointer[Ledger]
	l, err := Open(context.Background(), filepath.Join(t.TempDir(), "ductile.db"), Options{
		syncWAL: func(wal *os.File) error { return observe(opened.Load(), wal) },
	})
	require.NoError(t, err)
	opened.Store(l)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	require.NotNil(t, l.syncer.queue, "the syncer runs")
	return l
}

// within fails the test if fn does not return within 10 s (a hang, not a
// slow machine).
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	got := make(chan T, 1)
	go func() { got <- fn() }()
	select {
	case v := <-got:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen within 10s", what)
		panic("unreachable")
	}
}

// answer waits (within 10 s) for p's answer and requires success.
func answer(t *testing.T, what string, p *pending) []int64 {
	t.Helper()
	type result struct {
		seqs []int64
		err  error
	}
	r := within(t, what, func() result {
		seqs, err := p.wait()
		return result{seqs, err}
	})
	require.NoError(t, r.err, what)
	return r.seqs
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A durable append is answered only once an fsync that began after its
// commit has returned; a relaxed one is answered at commit, while an fsync
// is still under way; a durable append committed during an fsync waits for
// the next one.
func TestDurableAnswerWaitsForItsFsync(t *testing.T) {
	ctx := context.Background()
	type flush struct{ covers int64 } // this process's head when the fsync began
	began := make(chan flush, 1)
	release := make(chan struct{})
	var hold atomic.Bool
	hold.Store(true)
	l := openObserved(t, func(l *Ledger, wal *os.File) error {
		if hold.Load() {
			began <- flush{covers: l.Head()}
			<-release
		}
		return wal.Sync()
	})
	letGo := sync.OnceFunc(func() { hold.Store(false); close(release) })
	t.Cleanup(letGo) // before the ledger closes, which waits for the syncer
	appendOne := func(d Durability, stream string) *pending {
		return l.queueDecision(ctx, d, func(*Tx) ([]NewEvent, error) {
			return []NewEvent{{Stream: stream, Type: "t.appended"}}, nil
		})
	}

	// Given a durable append whose fsync has begun and is held,
	first := appendOne(Durable, "durable/1")
	f := within(t, "the first fsync", func() flush { return <-began })
	require.Equal(t, []int64{1}, first.r.seqs, "committed before its fsync began")
	require.GreaterOrEqual(t, f.covers, first.r.seqs[0])
	// then it is not answered while the fsync runs,
	require.False(t, isClosed(first.r.done), "a durable append was answered before its fsync returned")

	// a relaxed append commits and is answered meanwhile, although no
	// finished fsync covers it,
	seqs := answer(t, "a relaxed append's answer", appendOne(Relaxed, "relaxed/1"))
	require.Equal(t, []int64{2}, seqs)
	require.Greater(t, seqs[0], f.covers)

	// and a durable append committed during that fsync is not answered by
	// it.
	second := appendOne(Durable, "durable/2")
	within(t, "the second durable append's commit", func() bool {
		for {
			changed := l.Changed()
			if l.Head() >= 3 {
				return true
			}
			<-changed
		}
	})
	require.False(t, isClosed(first.r.done))
	require.False(t, isClosed(second.r.done))

	// When the fsync returns, the first is answered; the second only after
	// a flush of its own.
	syncs := l.WriteStats().Syncs
	letGo()
	require.Equal(t, []int64{1}, answer(t, "the first durable answer", first))
	require.Equal(t, []int64{3}, answer(t, "the second durable answer", second))
	require.Greater(t, l.WriteStats().Syncs, syncs, "the second durable append had an fsync of its own")
}

// syncLog records, in the order they happened, each fsync with the head
// it covers (recorded once the fsync returned) and each answer.
type syncLog struct {
	mu      sync.Mutex
	entries []syncEntry
}

type syncEntry struct {
	kind string // "fsync", "durable", "relaxed"
	seq  int64  // the head an fsync covers; an answer's last seq
}

func (s *syncLog) add(kind string, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, syncEntry{kind, seq})
}

// Under concurrent durable and relaxed appends, every durable answer comes
// after an fsync that covers its seq; relaxed answers may come before.
func TestEveryDurableAnswerFollowsACoveringFsync(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx := context.Background()
	var log syncLog
	l := openObserved(t, func(l *Ledger, wal *os.File) error {
		covers := l.Head() // committed, so written to the WAL, before the fsync begins
		err := wal.Sync()
		if err == nil {
			log.add("fsync", covers)
		}
		return err
	})

	const writers, appends = 8, 150
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range appends {
				d, kind := Durable, "durable"
				if rng.IntN(2) == 0 {
					d, kind = Relaxed, "relaxed"
				}
				evs := make([]NewEvent, 1+rng.IntN(3))
				for j := range evs {
					evs[j] = NewEvent{Stream: fmt.Sprintf("w%d/%d", w, i), ExpectedVersion: int64(j), Type: "t.appended"}
				}
				seqs, err := l.Decide(ctx, d, func(*Tx) ([]NewEvent, error) { return evs, nil })
				if err != nil {
					errs[w] = err
					return
				}
				log.add(kind, seqs[len(seqs)-1])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "seed %d", seed)
	}

	var covered int64
	durable, relaxedAhead := 0, 0
	log.mu.Lock()
	defer log.mu.Unlock()
	for i, e := range log.entries {
		switch e.kind {
		case "fsync":
			covered = max(covered, e.seq)
		case "durable":
			durable++
			require.LessOrEqual(t, e.seq, covered,
				"seed %d: entry %d: durable seq %d answered before an fsync covered it (covered up to %d)", seed, i, e.seq, covered)
		case "relaxed":
			if e.seq > covered {
				relaxedAhead++
			}
		}
	}
	require.Positive(t, durable)
	t.Logf("%d durable answers, each after a covering fsync; %d of %d relaxed answers came before one; %d fsyncs",
		durable, relaxedAhead, writers*appends-durable, l.WriteStats().Syncs)
}
