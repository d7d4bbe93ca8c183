package ledger

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The head witness only ever names a head a successful fsync has made
// durable: when the flush fails, the witness keeps the last durable head.
func TestWitnessNamesOnlyAFlushedHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	l, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	_, err = l.Append(ctx, NewEvent{Stream: "w/1", Type: "w.happened"})
	require.NoError(t, err)
	first, err := l.ReadStream(ctx, "w/1")
	require.NoError(t, err)
	require.NoError(t, l.Close()) // the syncer has written the witness by now
	want := string(encodeWitness(chainHead{seq: 1, hash: first[0].Hash}))
	b, err := os.ReadFile(WitnessPath(path))
	require.NoError(t, err)
	require.Equal(t, want, string(b))

	// The next fsync fails (its file is closed under it).
	l, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	require.NoError(t, l.syncer.wal.Close())
	seqs, err := l.Append(ctx, NewEvent{Stream: "w/2", Type: "w.happened"})
	require.ErrorIs(t, err, ErrNotDurable)
	require.Equal(t, []int64{2}, seqs, "committed, not flushed")
	_ = l.Close() // reports the closed WAL again
	b, err = os.ReadFile(WitnessPath(path))
	require.NoError(t, err)
	require.Equal(t, want, string(b), "the witness moved past the last durable head")
}
