package daemon_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/daemon"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLockKeepsASecondHolderOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	h, err := daemon.Holder(dir)
	require.NoError(t, err)
	require.Equal(t, daemon.LockHolder{}, h, "no lock file: nobody holds it")

	first, err := daemon.AcquireLock(dir, daemon.RoleCLI)
	require.NoError(t, err)
	b, err := os.ReadFile(daemon.LockPath(dir))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(os.Getpid())+" cli\n", string(b))

	// A second holder is refused, told who holds it.
	_, err = daemon.AcquireLock(dir, daemon.RoleDaemon)
	var le *daemon.LockError
	require.ErrorAs(t, err, &le)
	require.True(t, errors.Is(err, daemon.ErrLocked))
	require.Equal(t, os.Getpid(), le.PID)
	require.Equal(t, daemon.RoleCLI, le.Role)
	require.Contains(t, err.Error(), "(a ductile plugin run)")

	// A probe sees the holder, and a CLI is not a daemon.
	h, err = daemon.Holder(dir)
	require.NoError(t, err)
	require.Equal(t, daemon.LockHolder{Held: true, PID: os.Getpid(), Role: daemon.RoleCLI}, h)
	require.False(t, h.Daemon())

	// Released, it can be taken again, and the probe left it untouched.
	require.NoError(t, first.Release())
	second, err := daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.NoError(t, err)
	h, err = daemon.Holder(dir)
	require.NoError(t, err)
	require.True(t, h.Daemon())
	require.NoError(t, second.Release())

	// An in-place replay holding it is named as such.
	replay, err := daemon.AcquireLock(dir, daemon.RoleReplay)
	require.NoError(t, err)
	_, err = daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.ErrorContains(t, err, "(a ductile ledger replay)")
	require.NoError(t, replay.Release())
}

// The lock file names its holder only once the holder has rewritten it: in
// the window between taking the flock and that write (and for anything that
// takes the flock without writing, such as flock(1) in a backup script) it
// still names the previous holder, typically a daemon that has exited. The
// holder is the process the kernel reports, and the file's role counts only
// if the file names that process.
func TestHolderIsTheProcessHoldingTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	// A daemon held the lock and has gone: the file still names it.
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	deadPID := gone.Process.Pid
	require.NoError(t, os.WriteFile(daemon.LockPath(dir), []byte(strconv.Itoa(deadPID)+" daemon\n"), 0o600))

	// This process takes the flock, as AcquireLock does before it writes.
	f, err := os.OpenFile(daemon.LockPath(dir), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))

	h, err := daemon.Holder(dir)
	require.NoError(t, err)
	require.Equal(t, daemon.LockHolder{Held: true, PID: os.Getpid()}, h, "the holder is this process, its role not written yet")
	require.False(t, h.Daemon(), "a dead daemon named in the file is not the running daemon")
	_, err = daemon.AcquireLock(dir, daemon.RoleDaemon)
	var le *daemon.LockError
	require.ErrorAs(t, err, &le)
	require.Equal(t, os.Getpid(), le.PID)
	require.Empty(t, le.Role)
	require.NotContains(t, err.Error(), strconv.Itoa(deadPID))

	// Once the file names the holder, its role counts.
	require.NoError(t, f.Truncate(0))
	_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" daemon\n"), 0)
	require.NoError(t, err)
	h, err = daemon.Holder(dir)
	require.NoError(t, err)
	require.True(t, h.Daemon())
	require.Equal(t, os.Getpid(), h.PID)
}

// An error after the lock is taken used to panic (a nil *Daemon closed in
// a deferred cleanup). It is an error, and the lock is free again.
func TestOpenErrorIsAnErrorAndReleasesTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(daemon.DBPath(dir), 0o700)) // the ledger cannot open a directory
	_, err := daemon.OpenCore(context.Background(), daemon.CoreOptions{StateDir: dir})
	require.Error(t, err)
	l, err := daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.NoError(t, err, "the lock was released")
	require.NoError(t, l.Release())
	_, err = daemon.Open(context.Background(), daemon.Options{StateDir: dir})
	require.Error(t, err)
	l, err = daemon.AcquireLock(dir, daemon.RoleDaemon)
	require.NoError(t, err, "the lock was released by the daemon too")
	require.NoError(t, l.Release())
}
