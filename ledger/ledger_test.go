package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/ledger"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	path string
	l    *ledger.Ledger
}

// setup opens a ledger on a real file in a temp dir. Tests that are not about
// durability use synchronous=NORMAL to keep the suite quick.
func setup(t *testing.T, opts ledger.Options) *testBundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ductile.db")
	if opts.Synchronous == "" {
		opts.Synchronous = "NORMAL"
	}
	l, err := ledger.Open(context.Background(), path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return &testBundle{path: path, l: l}
}

func ev(stream string, expected int64, typ string, data any) ledger.NewEvent {
	return ledger.NewEvent{Stream: stream, ExpectedVersion: expected, Type: typ, Data: data, Meta: ledger.Meta{Actor: "test"}}
}

// rawConn opens a connection that bypasses the ledger, as an intruder would.
func rawConn(t *testing.T, path string) *sqlite.Conn {
	t.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	require.NoError(t, err)
	conn.SetBusyTimeout(5 * time.Second)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func runScript(t *testing.T, conn *sqlite.Conn, file string, args map[string]any) error {
	t.Helper()
	sql, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	return sqlitex.ExecuteScript(conn, string(sql), &sqlitex.ExecOptions{Named: args})
}

func TestAppendAssignsSeqsAndVersions(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx := context.Background()

	// Given an empty ledger, when two events go to a new stream and one to another,
	seqs, err := b.l.Append(ctx,
		ev("job/1", 0, "job.enqueued", map[string]any{"plugin": "echo"}),
		ev("job/1", 1, "job.started", nil),
		ev("job/2", 0, "job.enqueued", json.RawMessage(`{ "plugin" : "echo" }`)),
	)
	// then they get consecutive seqs and per-stream versions.
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, seqs)

	events, err := b.l.ReadStream(ctx, "job/1")
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, int64(1), events[0].Version)
	require.Equal(t, int64(2), events[1].Version)
	require.Equal(t, "job.started", events[1].Type)
	require.JSONEq(t, `{}`, string(events[1].Data))

	job2, err := b.l.ReadStream(ctx, "job/2")
	require.NoError(t, err)
	require.Equal(t, `{"plugin":"echo"}`, string(job2[0].Data), "data is stored compact")
	meta, err := job2[0].Metadata()
	require.NoError(t, err)
	require.EqualValues(t, "test", meta.Actor)
	require.Equal(t, int64(3), b.l.Head())
}

// Data encoded ahead (EncodeData) is stored exactly as appending the value
// itself would store it; encoding nothing stores an empty object, as nil does.
func TestEncodedDataIsStoredAsTheValueWouldBe(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx := context.Background()
	value := map[string]any{"payload": json.RawMessage(`{ "html" : "<b>&</b>" }`), "n": 1}
	encoded, err := ledger.EncodeData(value)
	require.NoError(t, err)
	_, err = ledger.EncodeData(json.RawMessage(`{"oops"`))
	require.ErrorIs(t, err, ledger.ErrInvalidEvent)

	_, err = b.l.Append(ctx,
		ev("a", 0, "x", value),
		ev("b", 0, "x", encoded),
		ev("c", 0, "x", ledger.EncodedData{}),
	)
	require.NoError(t, err)
	read := func(stream string) string {
		evs, err := b.l.ReadStream(ctx, stream)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		return string(evs[0].Data)
	}
	require.Equal(t, read("a"), read("b"))
	require.Equal(t, `{"n":1,"payload":{"html":"\u003cb\u003e\u0026\u003c/b\u003e"}}`, read("b"))
	require.Equal(t, "{}", read("c"))
}

func TestAppendVersionConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx := context.Background()
	_, err := b.l.Append(ctx, ev("job/1", 0, "job.enqueued", nil))
	require.NoError(t, err)

	tests := []struct {
		name     string
		expected int64
		actual   int64
	}{
		{"stream exists but expected new", 0, 1},
		{"expected ahead of the stream", 5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.l.Append(ctx, ev("job/1", tc.expected, "job.started", nil))
			require.ErrorIs(t, err, ledger.ErrVersionConflict)
			var vc *ledger.VersionConflictError
			require.ErrorAs(t, err, &vc)
			require.Equal(t, "job/1", vc.Stream)
			require.Equal(t, tc.expected, vc.Expected)
			require.Equal(t, tc.actual, vc.Actual)
		})
	}

	// AnyVersion appends without a check.
	seqs, err := b.l.Append(ctx, ev("job/1", ledger.AnyVersion, "job.started", nil))
	require.NoError(t, err)
	require.Equal(t, []int64{2}, seqs)
}

func TestAppendIsAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		bad     ledger.NewEvent
		wantErr error
	}{
		{"version conflict", ev("job/a", 7, "job.started", nil), ledger.ErrVersionConflict},
		{"invalid JSON data", ev("job/b", 0, "job.enqueued", json.RawMessage(`{"oops"`)), ledger.ErrInvalidEvent},
		{"empty stream", ev("", 0, "job.enqueued", nil), ledger.ErrInvalidEvent},
		{"empty type", ev("job/c", 0, "", nil), ledger.ErrInvalidEvent},
		{"unmarshalable data", ev("job/d", 0, "x.y", func() {}), ledger.ErrInvalidEvent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, ledger.Options{})
			// Given a ledger with one event,
			_, err := b.l.Append(ctx, ev("job/0", 0, "job.enqueued", nil))
			require.NoError(t, err)
			// when a batch of good events ends with a bad one,
			_, err = b.l.Append(ctx,
				ev("job/a", 0, "job.enqueued", nil),
				ev("job/z", 0, "job.enqueued", nil),
				tc.bad,
			)
			// then it fails and none of the batch is in the log.
			require.ErrorIs(t, err, tc.wantErr)
			last, err := b.l.LastSeq(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), last)
			events, err := b.l.ReadStream(ctx, "job/a")
			require.NoError(t, err)
			require.Empty(t, events)
			// and the chain continues cleanly after the failure.
			_, err = b.l.Append(ctx, ev("job/a", 0, "job.enqueued", nil))
			require.NoError(t, err)
			res, err := b.l.Verify(ctx, nil)
			require.NoError(t, err)
			require.True(t, res.OK, res.Problem)
			require.Equal(t, int64(2), res.Events)
		})
	}
}

func TestDecideRunsInsideTheWriteTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx := context.Background()

	// 50 goroutines each try to reserve one key, deciding from what the
	// stream holds: exactly one gets it, without any version conflict.
	reserve := func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		v, err := tx.StreamVersion("dedupe/k")
		if err != nil || v > 0 {
			return nil, err
		}
		return []ledger.NewEvent{ev("dedupe/k", 0, "dedupe.reserved", nil)}, nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs, err := b.l.Decide(ctx, ledger.Durable, reserve)
			require.NoError(t, err)
			mu.Lock()
			winners += len(seqs)
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, 1, winners)

	// A decision that fails appends nothing and returns its error.
	boom := errors.New("boom")
	_, err := b.l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	// A decision that panics fails only its caller.
	_, err = b.l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) { panic("bad decision") })
	require.ErrorContains(t, err, "bad decision")
	_, err = b.l.Append(ctx, ev("job/after", 0, "job.enqueued", nil))
	require.NoError(t, err)
}

func TestTriggersRefuseUpdateAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	_, err := b.l.Append(context.Background(), ev("job/1", 0, "job.enqueued", nil))
	require.NoError(t, err)
	conn := rawConn(t, b.path)

	err = runScript(t, conn, "update_event.sql", nil)
	require.ErrorContains(t, err, "events are append-only: UPDATE is not allowed")
	err = runScript(t, conn, "delete_event.sql", nil)
	require.ErrorContains(t, err, "events are append-only: DELETE is not allowed")

	res, err := b.l.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Equal(t, int64(1), res.Events)
}

func TestVerifyFindsTheTamperedSeq(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx := context.Background()
	for i := range 100 {
		_, err := b.l.Append(ctx, ev(fmt.Sprintf("acct/%d", i%7), ledger.AnyVersion, "acct.credited", map[string]int{"amount": i}))
		require.NoError(t, err)
	}
	res, err := b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Equal(t, int64(100), res.LastSeq)

	require.NoError(t, runScript(t, rawConn(t, b.path), "tamper.sql", map[string]any{":seq": 57}))

	res, err = b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Equal(t, int64(57), res.BadSeq)
	require.Equal(t, int64(56), res.Events, "events before the tampered one still verify")
	require.Contains(t, res.Problem, "does not match its hash")
}

func TestHashChainHoldsAcrossGroupCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx := context.Background()
	const writers, each = 16, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := b.l.Append(ctx, ev(fmt.Sprintf("w/%d", w), int64(i), "w.wrote", map[string]int{"i": i}))
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()

	res, err := b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.Equal(t, int64(writers*each), res.Events)

	// Every event carries the previous one's hash, and batches shared commits.
	var prev []byte
	times := map[time.Time]int{}
	_, err = b.l.ReadFrom(ctx, 0, writers*each, ledger.Filter{}, func(e ledger.Event) error {
		if prev != nil {
			require.Equal(t, prev, e.PrevHash, "seq %d", e.Seq)
		}
		prev = e.Hash
		times[e.RecordedAt]++
		return nil
	})
	require.NoError(t, err)
	require.Less(t, len(times), writers*each, "some appends should have shared a transaction")
}

func TestReadFromFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx := context.Background()
	for i := range 20 {
		typ := "a.happened"
		if i%2 == 1 {
			typ = "b.happened"
		}
		_, err := b.l.Append(ctx, ev(fmt.Sprintf("s/%d", i%3), ledger.AnyVersion, typ, nil))
		require.NoError(t, err)
	}
	collect := func(after int64, limit int, f ledger.Filter) []int64 {
		var seqs []int64
		_, err := b.l.ReadFrom(ctx, after, limit, f, func(e ledger.Event) error {
			seqs = append(seqs, e.Seq)
			return nil
		})
		require.NoError(t, err)
		return seqs
	}
	require.Equal(t, []int64{16, 17, 18, 19, 20}, collect(15, 100, ledger.Filter{}))
	require.Equal(t, []int64{2, 4, 6}, collect(0, 3, ledger.Filter{Type: "b.happened"}))
	require.Equal(t, []int64{3, 6, 9, 12, 15, 18}, collect(0, 100, ledger.Filter{Stream: "s/2"}))
	require.Equal(t, []int64{6, 12, 18}, collect(0, 100, ledger.Filter{Stream: "s/2", Type: "b.happened"}))
	require.Equal(t, []int64{12, 15}, collect(9, 2, ledger.Filter{Stream: "s/2"}), "after a seq, up to a limit")
	require.Equal(t, []int64{18}, collect(12, 100, ledger.Filter{Stream: "s/2", Type: "b.happened"}))
}

func TestClosedLedgerRefusesAppends(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ductile.db")
	l, err := ledger.Open(context.Background(), path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	_, err = l.Append(context.Background(), ev("job/1", 0, "job.enqueued", nil))
	require.ErrorIs(t, err, ledger.ErrClosed)
	require.NoError(t, l.Close(), "closing twice is fine")
}

func TestChangedWakesOnOwnAndOtherProcessesCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	changed := b.l.Changed()
	_, err := b.l.Append(ctx, ev("job/1", 0, "job.enqueued", nil))
	require.NoError(t, err)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no wake-up after our own commit")
	}

	// A second Ledger on the same file stands in for another process. It
	// only watches: every write to the file from now on is the first one's,
	// and its watcher starts last in Open, so it saw none of the writes
	// before. A wake-up of its can only come through the file.
	other, err := ledger.Open(ctx, b.path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer other.Close()
	require.True(t, other.Watching())
	changed = other.Changed()
	select {
	case <-changed:
		t.Fatal("woken before anything was appended")
	default:
	}
	_, err = b.l.Append(ctx, ev("job/2", 0, "job.enqueued", nil))
	require.NoError(t, err)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no wake-up after another connection's commit")
	}
	last, err := other.LastSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), last)
}

// Relaxed appends are answered at commit, yet never left unsynced: the
// syncer flushes within RelaxedSyncDelay, one flush serves many, and a
// relaxed commit after a flush asks for one of its own.
func TestRelaxedAppendsAreFlushedSoonAndTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, ledger.Options{Synchronous: "FULL"}) // the syncer runs
	appendRelaxed := func(i int) {
		t.Helper()
		_, err := b.l.Decide(context.Background(), ledger.Relaxed, func(*ledger.Tx) ([]ledger.NewEvent, error) {
			return []ledger.NewEvent{ev(fmt.Sprintf("s/%d", i), 0, "relaxed.appended", map[string]int{"i": i})}, nil
		})
		require.NoError(t, err)
	}
	// No durable append follows: only the bounded delay brings the flushes.
	allSynced := func(commits int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for st := b.l.WriteStats(); st.Synced < commits; st = b.l.WriteStats() {
			require.True(t, time.Now().Before(deadline), "relaxed commits left unsynced: %+v", st)
			time.Sleep(time.Millisecond)
		}
	}
	const n = 100
	for i := range n {
		appendRelaxed(i)
	}
	require.Equal(t, int64(n), b.l.WriteStats().Commits)
	allSynced(n)
	require.Less(t, b.l.WriteStats().Syncs, int64(n/2), "flushes are shared, not one per relaxed commit")

	// Once everything is flushed, the next relaxed commit is flushed too.
	appendRelaxed(n)
	allSynced(n + 1)
}

// Closing flushes what relaxed appends left unsynced.
func TestCloseFlushesRelaxedAppends(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ductile.db")
	l, err := ledger.Open(context.Background(), path, ledger.Options{})
	require.NoError(t, err)
	_, err = l.Decide(context.Background(), ledger.Relaxed, func(*ledger.Tx) ([]ledger.NewEvent, error) {
		return []ledger.NewEvent{ev("s/1", 0, "relaxed.appended", map[string]int{})}, nil
	})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.Equal(t, int64(1), l.WriteStats().Syncs, "Close flushed the relaxed commit")
}

// An inline projection that fails or panics loses only what it wrote: the
// appends of its batch commit all the same.
func TestInlineProjectionFailureUndoesOnlyItsOwnWrites(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"error", "panic"} {
		b := setup(t, ledger.Options{})
		var calls int
		var writeErr error // checked after the append: the projection runs on the writer goroutine
		b.l.SetInlineProjection(func(conn *sqlite.Conn, appended []ledger.Event) (func(), error) {
			calls++
			writeErr = sqlitex.Execute(conn, `INSERT INTO projector_checkpoint (name, seq) VALUES ('scratch', 99)`, nil)
			if mode == "panic" {
				panic("projection bug")
			}
			return nil, errors.New("projection bug")
		})
		seqs, err := b.l.Append(context.Background(), ev("s/1", 0, "t.happened", map[string]int{}))
		require.NoError(t, err, mode)
		require.NoError(t, writeErr, mode)
		require.Equal(t, []int64{1}, seqs)
		require.Equal(t, 1, calls)
		b.l.SetInlineProjection(nil)

		conn := rawConn(t, b.path)
		var rows int
		require.NoError(t, sqlitex.Execute(conn, `SELECT count(*) FROM projector_checkpoint WHERE name = 'scratch'`, &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error { rows = stmt.ColumnInt(0); return nil },
		}))
		require.Zero(t, rows, "%s: the projection's write was undone", mode)
		head, err := b.l.LastSeq(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(1), head, "%s: the append committed", mode)
	}
}
