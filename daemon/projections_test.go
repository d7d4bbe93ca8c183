package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// openStateDir opens a ledger in a new state directory, as a one-shot
// command does, with one job enqueued and not projected.
func openStateDir(t *testing.T) (string, *ledger.Ledger) {
	t.Helper()
	dir := t.TempDir()
	l, err := ledger.Open(context.Background(), daemon.DBPath(dir), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	_, err = commands.EnqueueJob(context.Background(), l, commands.Enqueue{Plugin: "echo", Command: "poll",
		SubmittedBy: events.ActorCLI, MaxAttempts: 1, Now: time.Now()})
	require.NoError(t, err)
	return dir, l
}

func checkpoint(t *testing.T, l *ledger.Ledger) int64 {
	t.Helper()
	cp, err := projections.ReadCheckpoint(context.Background(), l)
	require.NoError(t, err)
	return cp
}

// TestCatchUpUnlessHeld: after a one-shot command's append, the projections
// are brought up to date only when no process holds the state directory:
// a holder projects them itself.
func TestCatchUpUnlessHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, l := openStateDir(t)

	lock, err := daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.NoError(t, err)
	require.NoError(t, daemon.CatchUpUnlessHeld(ctx, dir, l, quiet))
	require.Zero(t, checkpoint(t, l), "held: left to the holder")

	require.NoError(t, lock.Release())
	require.NoError(t, daemon.CatchUpUnlessHeld(ctx, dir, l, quiet))
	head, err := l.LastSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, head, checkpoint(t, l), "free: caught up here")
}

// TestReplayInPlaceHoldsTheLock: a replay in place, dry or not, is refused
// with the holder's PID and role while another process holds the state
// directory; free, it rebuilds the projections to the head (a dry run only
// says to which), and leaves the lock free.
func TestReplayInPlaceHoldsTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, l := openStateDir(t)
	head, err := l.LastSeq(ctx)
	require.NoError(t, err)

	lock, err := daemon.AcquireLock(dir, daemon.RoleCLI)
	require.NoError(t, err)
	for _, dry := range []bool{true, false} {
		_, err := daemon.ReplayInPlace(ctx, dir, l, dry)
		var held *daemon.LockError
		require.ErrorAs(t, err, &held, "dry run %v", dry)
		require.Equal(t, os.Getpid(), held.PID)
		require.Equal(t, daemon.RoleCLI, held.Role)
		require.ErrorIs(t, err, daemon.ErrLocked)
	}
	require.NoError(t, lock.Release())

	r, err := daemon.ReplayInPlace(ctx, dir, l, true)
	require.NoError(t, err)
	require.Equal(t, daemon.Replay{Until: head}, r)
	require.Zero(t, checkpoint(t, l), "a dry run changes nothing")

	r, err = daemon.ReplayInPlace(ctx, dir, l, false)
	require.NoError(t, err)
	require.Equal(t, daemon.Replay{Until: head, Checkpoint: head}, r)
	require.Equal(t, head, checkpoint(t, l))
	h, err := daemon.Holder(dir)
	require.NoError(t, err)
	require.False(t, h.Held, "the replay let go of the lock")
}
