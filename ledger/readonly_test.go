package ledger_test

import (
	"context"
	"errors"
	"os"
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

// A reader of a read-only (0444) database leaves its -wal and -shm behind
// with the database's mode at that moment. Once the database is writable
// again, the next writer gives them the database's mode back; else every
// writer but root would fail on them ("attempt to write a readonly
// database").
func TestWriterMendsSideFilesAReaderLeftReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	l, err := ledger.Open(ctx, path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	_, err = l.Append(ctx, ev("ro/1", 0, "ro.created", nil))
	require.NoError(t, err)
	require.NoError(t, l.Close())

	require.NoError(t, os.Chmod(path, 0o444))
	ro, err := ledger.Open(ctx, path, ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	sides := []string{path + "-wal", path + "-shm"}
	for _, side := range sides {
		fi, err := os.Stat(side)
		require.NoError(t, err, "the reader made no %s: the case this test is about did not arise", side)
		require.Equal(t, os.FileMode(0o444), fi.Mode().Perm(), side)
	}
	require.NoError(t, ro.Close())
	for _, side := range sides {
		require.FileExists(t, side, "a read-only reader cannot checkpoint, so it leaves its side files")
	}

	// SkipMigrate: the migration's own connection would otherwise close
	// last and remove the side files, which, as root, it can: the test
	// would pass without the mending it is about.
	require.NoError(t, os.Chmod(path, 0o600))
	l, err = ledger.Open(ctx, path, ledger.Options{Synchronous: "NORMAL", SkipMigrate: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	for _, side := range sides {
		fi, err := os.Stat(side)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), side)
	}
	_, err = l.Append(ctx, ev("ro/1", 1, "ro.updated", nil))
	require.NoError(t, err)
}
