package ledger_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
)

// TestAProcessThatDoesNotProjectRingsTheDoorbell opens two ledgers on one
// file, as a daemon (it projects its own appends) and a CLI beside it. Only
// the CLI's commits ring the doorbell, and the daemon's watcher wakes on a
// ring alone, with no write to the WAL: that is how a CLI's commit reaches
// the daemon as soon as it is visible.
func TestAProcessThatDoesNotProjectRingsTheDoorbell(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := setup(t, ledger.Options{})
	d.l.SetInlineProjection(func(*sqlite.Conn, []ledger.Event) (func(), error) { return func() {}, nil })
	bell := d.path + "-wake"
	rung := func() int64 {
		t.Helper()
		fi, err := os.Stat(bell)
		require.NoError(t, err, "opening a ledger creates its doorbell")
		return fi.Size()
	}

	// A ring alone, with nothing written to the WAL since the watcher
	// started, wakes the daemon's waiters on other processes' commits.
	woken := d.l.External()
	require.Zero(t, rung())
	require.NoError(t, os.WriteFile(bell, []byte{1}, 0o600))
	select {
	case <-woken:
	case <-ctx.Done():
		t.Fatal("the doorbell did not wake the daemon's watcher")
	}
	require.NoError(t, os.Truncate(bell, 0))

	_, err := d.l.Append(ctx, ev("job/1", 0, "job.enqueued", nil))
	require.NoError(t, err)
	require.Zero(t, rung(), "a process that projects its appends does not ring")

	cli, err := ledger.Open(ctx, d.path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Append(ctx, ev("job/2", 0, "job.enqueued", nil))
	require.NoError(t, err)
	require.Equal(t, int64(1), rung(), "a process that does not project its appends rings once they are committed")
}
