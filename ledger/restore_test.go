package ledger_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
)

// A backup restored beside the head witness of the ledger that went on
// past it is a lag: a writer refuses it (Lagging set), AdoptRestore opens
// it and reports what it adopted, and once something is appended and
// flushed the witness follows the restored ledger. A head rewritten in
// place is no lag: AdoptRestore refuses it as any writer does.
func TestAdoptRestoreTakesOnlyALag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ductile.db")
	fullLedger(t, path, 6)
	l, err := ledger.Open(ctx, path, ledger.Options{})
	require.NoError(t, err)
	copyPath := filepath.Join(dir, "copy.db")
	_, err = l.Backup(ctx, copyPath, nil)
	require.NoError(t, err)
	for range 4 {
		_, err := l.Append(ctx, ev("h/more", ledger.AnyVersion, "h.happened", nil))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	b, err := os.ReadFile(copyPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))

	_, err = ledger.Open(ctx, path, ledger.Options{})
	var damaged *ledger.DamagedError
	require.ErrorAs(t, err, &damaged)
	require.True(t, damaged.Check.Lagging, "%+v", damaged.Check)
	require.True(t, damaged.Check.Truncated)

	adopted, err := ledger.Open(ctx, path, ledger.Options{AdoptRestore: true})
	require.NoError(t, err)
	require.NotNil(t, adopted.Damage())
	require.True(t, adopted.Damage().Lagging)
	require.Equal(t, int64(6), adopted.Damage().Head)
	_, err = adopted.Append(ctx, ev("h/adopted", ledger.AnyVersion, "h.happened", nil))
	require.NoError(t, err)
	require.NoError(t, adopted.Close())
	again, err := ledger.Open(ctx, path, ledger.Options{})
	require.NoError(t, err, "the witness follows the adopted ledger")
	require.Nil(t, again.Damage())
	require.NoError(t, again.Close())

	// A rewritten head (TestRewrittenHeadIsRefused) is not adopted.
	other := filepath.Join(t.TempDir(), "ductile.db")
	fullLedger(t, other, 10)
	truncate(t, other, 7)
	unchecked, err := ledger.Open(ctx, other, ledger.Options{SkipMigrate: true, Synchronous: "NORMAL"})
	require.NoError(t, err)
	for i := range 4 {
		_, err := unchecked.Append(ctx, ev("h/other", int64(i), "h.happened", nil))
		require.NoError(t, err)
	}
	require.NoError(t, unchecked.Close())
	_, err = ledger.Open(ctx, other, ledger.Options{AdoptRestore: true})
	require.ErrorAs(t, err, &damaged)
	require.False(t, damaged.Check.Lagging)
}
