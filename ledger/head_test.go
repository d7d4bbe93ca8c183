package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/ledger"
)

// fullLedger appends n events to a new ledger at path with production
// durability (so the syncer writes the head witness) and closes it.
func fullLedger(t *testing.T, path string, n int) []ledger.Event {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, path, ledger.Options{})
	require.NoError(t, err)
	for i := range n {
		_, err := l.Append(ctx, ev(fmt.Sprintf("h/%d", i%3), ledger.AnyVersion, "h.happened", map[string]int{"i": i}))
		require.NoError(t, err)
	}
	var evs []ledger.Event
	_, err = l.ReadFrom(ctx, 0, n, ledger.Filter{}, func(e ledger.Event) error { evs = append(evs, e); return nil })
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return evs
}

// truncate deletes every event after seq behind the triggers' back.
func truncate(t *testing.T, path string, seq int64) {
	t.Helper()
	err := sqlitex.ExecuteScript(rawConn(t, path), fmt.Sprintf(`
DROP TRIGGER events_no_delete;
DELETE FROM events WHERE seq > %d;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed');
END;`, seq), nil)
	require.NoError(t, err)
}

// A ledger whose newest events were deleted still has a chain that
// verifies; the head witness the syncer wrote names what was removed, a
// writer refuses to open it, and a reader can see why. Allowed, it opens,
// appends, and records its head anew.
func TestTruncatedLedgerIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	evs := fullLedger(t, path, 10)
	witness, err := os.ReadFile(ledger.WitnessPath(path))
	require.NoError(t, err)
	require.Contains(t, string(witness), fmt.Sprintf(" 00000000000000000010 %x ", evs[9].Hash), "the head a flush made durable")
	truncate(t, path, 7)

	_, err = ledger.Open(ctx, path, ledger.Options{})
	var damaged *ledger.DamagedError
	require.ErrorAs(t, err, &damaged)
	require.ErrorIs(t, err, ledger.ErrDamaged)
	want := fmt.Sprintf("the ledger ends at seq 7 but seq 10 (hash %s…) was recorded by the head witness %s: events were removed",
		short(evs[9].Hash), ledger.WitnessPath(path))
	require.Equal(t, want, damaged.Check.Problem)
	require.True(t, damaged.Check.Truncated)
	require.False(t, damaged.Check.Projections)

	ro, err := ledger.Open(ctx, path, ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	check, err := ro.CheckHead(ctx)
	require.NoError(t, err)
	require.NoError(t, ro.Close())
	require.Equal(t, want, check.Problem)
	require.Equal(t, int64(7), check.Head)
	res := verify(t, path)
	require.True(t, res.OK, "the chain alone does not show it")

	// Allowed, it opens; the old witness is gone and the next flush writes
	// the new head, so the next open is clean.
	l, err := ledger.Open(ctx, path, ledger.Options{AllowDamaged: true})
	require.NoError(t, err)
	require.NotNil(t, l.Damage())
	require.Equal(t, want, l.Damage().Problem)
	seqs, err := l.Append(ctx, ev("h/new", 0, "h.happened", nil))
	require.NoError(t, err)
	require.Equal(t, []int64{8}, seqs)
	require.NoError(t, l.Close())
	l, err = ledger.Open(ctx, path, ledger.Options{})
	require.NoError(t, err)
	require.Nil(t, l.Damage())
	require.NoError(t, l.Close())
}

// Events removed and others appended in their place (by a writer that does
// not check) leave a head past the witness's seq: the event at that seq is
// not the one witnessed.
func TestRewrittenHeadIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	evs := fullLedger(t, path, 10)
	truncate(t, path, 7)
	unchecked, err := ledger.Open(ctx, path, ledger.Options{SkipMigrate: true, Synchronous: "NORMAL"})
	require.NoError(t, err)
	for i := range 4 {
		_, err := unchecked.Append(ctx, ev("h/other", int64(i), "h.happened", nil))
		require.NoError(t, err)
	}
	require.NoError(t, unchecked.Close())

	_, err = ledger.Open(ctx, path, ledger.Options{})
	var damaged *ledger.DamagedError
	require.ErrorAs(t, err, &damaged)
	require.Contains(t, damaged.Check.Problem, fmt.Sprintf("the event at seq 10 is not the one the head witness %s recorded (hash %s… recorded",
		ledger.WitnessPath(path), short(evs[9].Hash)))
	require.False(t, damaged.Check.Truncated)
}

// The projector's checkpoint records the seq and hash of the last event
// applied: with no witness (deleted too, or never written), a checkpoint
// past the head still shows the truncation, and says the projections are
// off the chain.
func TestCheckpointPastTheHeadIsATruncation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	evs := fullLedger(t, path, 10)
	require.NoError(t, os.Remove(ledger.WitnessPath(path)))
	err := sqlitex.Execute(rawConn(t, path), "INSERT INTO projector_checkpoint (name, seq, hash) VALUES ('main', 9, ?)",
		&sqlitex.ExecOptions{Args: []any{evs[8].Hash}})
	require.NoError(t, err)
	truncate(t, path, 6)

	_, err = ledger.Open(ctx, path, ledger.Options{})
	var damaged *ledger.DamagedError
	require.ErrorAs(t, err, &damaged)
	require.Equal(t, fmt.Sprintf("the ledger ends at seq 6 but seq 9 (hash %s…) was recorded by the projector checkpoint main: events were removed", short(evs[8].Hash)),
		damaged.Check.Problem)
	require.True(t, damaged.Check.Truncated)
	require.True(t, damaged.Check.Projections)
}

// At open a writer verifies the chain from the last recorded head to the
// log's head, not the whole history: an event changed after the witnessed
// head is caught there; one changed before it is left to ledger verify.
func TestOpenVerifiesTheChainFromTheLastRecordedHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	fullLedger(t, path, 10) // witnessed at 10
	// Events 11..15 appended by a process that writes no witness.
	other, err := ledger.Open(ctx, path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	for i := range 5 {
		_, err := other.Append(ctx, ev("h/more", int64(i), "h.happened", nil))
		require.NoError(t, err)
	}
	require.NoError(t, other.Close())
	tamper := func(seq int) {
		err := sqlitex.ExecuteScript(rawConn(t, path), fmt.Sprintf(`
DROP TRIGGER events_no_update;
UPDATE events SET data = '{"tampered":true}' WHERE seq = %d;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: UPDATE is not allowed');
END;`, seq), nil)
		require.NoError(t, err)
	}

	tamper(5)
	l, err := ledger.Open(ctx, path, ledger.Options{})
	require.NoError(t, err, "the history before the witnessed head is not walked at open")
	require.NoError(t, l.Close())
	require.Equal(t, int64(5), verify(t, path).BadSeq, "ledger verify walks it")

	tamper(13)
	_, err = ledger.Open(ctx, path, ledger.Options{})
	var damaged *ledger.DamagedError
	require.ErrorAs(t, err, &damaged)
	require.Equal(t, "the chain breaks at seq 13, at or after the last recorded head (seq 10): content does not match its hash: the event was changed after it was written",
		damaged.Check.Problem)
}

func verify(t *testing.T, path string) ledger.VerifyResult {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	res, err := l.Verify(context.Background(), nil)
	require.NoError(t, err)
	return res
}

// short is how the ledger's messages abbreviate a hash.
func short(hash []byte) string { return fmt.Sprintf("%x", hash)[:16] }

// BenchmarkOpenChecksTheHead measures a writer's Open and Close on a
// ledger of 100,000 events, whose head was witnessed (as after a clean
// stop) or lies `unwitnessed` events past the witness (appended by a
// process that writes none): the check at open walks only those.
func BenchmarkOpenChecksTheHead(b *testing.B) {
	for _, unwitnessed := range []int{0, 1000} {
		b.Run(fmt.Sprintf("unwitnessed=%d", unwitnessed), func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "ductile.db")
			const events = 100_000
			l, err := ledger.Open(ctx, path, ledger.Options{})
			if err != nil {
				b.Fatal(err)
			}
			batch := make([]ledger.NewEvent, 1000)
			for i := 0; i < events-unwitnessed; i += len(batch) {
				for j := range batch {
					batch[j] = ev(fmt.Sprintf("b/%d", i+j), 0, "b.happened", map[string]int{"i": i + j})
				}
				if _, err := l.Append(ctx, batch...); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			if unwitnessed > 0 {
				other, err := ledger.Open(ctx, path, ledger.Options{Synchronous: "NORMAL"})
				if err != nil {
					b.Fatal(err)
				}
				for j := range batch[:unwitnessed] {
					batch[j] = ev(fmt.Sprintf("b/u%d", j), 0, "b.happened", nil)
				}
				if _, err := other.Append(ctx, batch[:unwitnessed]...); err != nil {
					b.Fatal(err)
				}
				if err := other.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				l, err := ledger.Open(ctx, path, ledger.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
