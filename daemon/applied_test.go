package daemon_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

func recordApplied(t *testing.T, l *ledger.Ledger, pid int) {
	t.Helper()
	_, err := l.Append(context.Background(), ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion,
		Type: events.ConfigApplied, Data: events.ConfigAppliedData{PID: pid, Plugins: []events.AppliedPlugin{{Name: "echo"}}}})
	require.NoError(t, err)
}

// TestWaitAppliedWaitsForTheHoldersRecord: the record of the daemon that
// holds the lock is returned, at once if it is there and else once it is
// appended; a previous daemon's record does not count.
func TestWaitAppliedWaitsForTheHoldersRecord(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, l := openStateDir(t)
	lock, err := daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.NoError(t, err)
	defer lock.Release()
	pid := os.Getpid()

	recordApplied(t, l, pid+1) // a previous daemon's
	done := make(chan error, 1)
	var got events.ConfigAppliedData
	go func() {
		var err error
		got, err = daemon.WaitApplied(ctx, dir, l, pid)
		done <- err
	}()
	recordApplied(t, l, pid+2) // still not the holder's
	recordApplied(t, l, pid)
	require.NoError(t, <-done)
	require.Equal(t, pid, got.PID)
	require.Equal(t, "echo", got.Plugins[0].Name)

	got, err = daemon.WaitApplied(ctx, dir, l, pid)
	require.NoError(t, err, "there already")
	require.Equal(t, pid, got.PID)
}

// TestWaitAppliedEndsWhenTheDaemonStops: a daemon that lets go of the lock
// before it records what it loaded ends the wait with ErrDaemonStopped; a
// wait whose context ends returns the context's error.
func TestWaitAppliedEndsWhenTheDaemonStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, l := openStateDir(t)
	lock, err := daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := daemon.WaitApplied(ctx, dir, l, os.Getpid())
		done <- err
	}()
	require.NoError(t, lock.Release())
	require.ErrorIs(t, <-done, daemon.ErrDaemonStopped)

	lock, err = daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.NoError(t, err)
	defer lock.Release()
	short, stop := context.WithCancel(ctx)
	go func() {
		_, err := daemon.WaitApplied(short, dir, l, os.Getpid())
		done <- err
	}()
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
}
