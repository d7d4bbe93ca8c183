package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
)

// A backup taken while another goroutine appends is the log of one
// moment: its head is the one Backup reports, its chain verifies, and it
// is a single file. A cancelled backup leaves nothing at its path.
func TestBackupIsOneSnapshotWhileAppendsGoOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := ledger.Open(ctx, filepath.Join(dir, "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	for i := range 2000 {
		_, err := l.Append(ctx, ev(fmt.Sprintf("b/%d", i%7), ledger.AnyVersion, "b.happened", map[string]int{"i": i}))
		require.NoError(t, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var appendErr error
	wg.Go(func() {
		for i := 0; appendErr == nil; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, appendErr = l.Append(ctx, ev("more", ledger.AnyVersion, "b.happened", map[string]int{"i": i}))
		}
	})
	to := filepath.Join(dir, "copies", "b.db")
	var calls int
	r, err := l.Backup(ctx, to, func(done, total int) {
		calls++
		require.LessOrEqual(t, done, total)
	})
	close(stop)
	wg.Wait()
	require.NoError(t, appendErr)
	require.NoError(t, err)
	require.Positive(t, calls)
	require.GreaterOrEqual(t, r.Head, int64(2000))
	require.NoFileExists(t, to+"-wal")

	c, err := ledger.Open(ctx, to, ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	defer c.Close()
	v, err := c.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, v.OK, v.Problem)
	require.Equal(t, r.Head, v.LastSeq, "the copy ends where the backup said")
	head, err := c.CheckHead(ctx)
	require.NoError(t, err)
	require.Equal(t, r.HeadHash, head.HeadHash)

	_, err = l.Backup(ctx, to, nil)
	require.ErrorContains(t, err, "already exists")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	other := filepath.Join(dir, "copies", "c.db")
	_, err = l.Backup(cancelled, other, nil)
	require.Error(t, err)
	require.NoFileExists(t, other)
	left, err := os.ReadDir(filepath.Join(dir, "copies"))
	require.NoError(t, err)
	require.Len(t, left, 1, "only the first copy: nothing of the cancelled one")
}
