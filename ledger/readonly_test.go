package ledger_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/ledger"
)

// A ledger opened read-only creates nothing where there is none, refuses
// every write, and reads what a writer on the same file commits meanwhile.
func TestReadOnlyLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "nowhere", "ductile.db")
	_, err := ledger.Open(ctx, missing, ledger.Options{ReadOnly: true})
	require.ErrorIs(t, err, ledger.ErrNoLedger)
	require.ErrorContains(t, err, missing)
	require.NoDirExists(t, filepath.Dir(missing))

	b := setup(t, ledger.Options{})
	_, err = b.l.Append(ctx, ev("ro/1", 0, "ro.created", nil))
	require.NoError(t, err)
	ro, err := ledger.Open(ctx, b.path, ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, ro.Close()) }()
	require.Equal(t, int64(1), ro.Head())

	_, err = ro.Append(ctx, ev("ro/2", 0, "ro.created", nil))
	require.ErrorIs(t, err, ledger.ErrReadOnly)
	err = ro.WriteProjections(ctx, func(*sqlite.Conn) error { return errors.New("must not run") })
	require.ErrorIs(t, err, ledger.ErrReadOnly)
	err = ro.Read(ctx, func(conn *sqlite.Conn) error {
		return sqlitex.ExecuteTransient(conn, "CREATE TABLE intruder (x);", nil)
	})
	require.Error(t, err, "a read connection wrote")

	// The writer's next commit is visible to the reader.
	_, err = b.l.Append(ctx, ev("ro/1", 1, "ro.updated", nil))
	require.NoError(t, err)
	seq, err := ro.LastSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), seq)
	evs, err := ro.ReadStream(ctx, "ro/1")
	require.NoError(t, err)
	require.Len(t, evs, 2)
}
