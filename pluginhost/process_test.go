package pluginhost_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
)

// startGroup starts a shell leading its own process group, with a child
// in it, as a plugin runs; the test's cleanup ends the group.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 1000 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	// The child is in the group once the shell has forked it.
	waitCond(t, func() bool { return len(groupMembers(t, cmd.Process.Pid)) == 2 })
	return cmd
}

// waitCond waits, with a generous bound, for cond.
func waitCond(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.False(t, time.Now().After(deadline), "gave up waiting")
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEndProcessGroupEndsOnlyTheProcessRecorded: the group of a recorded
// process is ended, all of it, only while its leader is that very process:
// a record of another start time (a pid reused) or of another boot ends
// nothing (issue 20, item 22).
func TestEndProcessGroupEndsOnlyTheProcessRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cmd := startGroup(t)
	pid := cmd.Process.Pid
	rec, err := pluginhost.ProcessOf(pid)
	require.NoError(t, err)
	require.Equal(t, pid, rec.PGID)
	require.Positive(t, rec.StartTicks)
	require.Len(t, rec.BootID, 36)

	reused := rec
	reused.StartTicks++
	found, err := pluginhost.EndProcessGroup(ctx, reused)
	require.NoError(t, err)
	require.False(t, found, "another process of the same pid is not the one recorded")
	otherBoot := rec
	otherBoot.BootID = "00000000-0000-0000-0000-000000000000"
	found, err = pluginhost.EndProcessGroup(ctx, otherBoot)
	require.NoError(t, err)
	require.False(t, found, "a record of another boot")
	require.Len(t, groupMembers(t, pid), 2, "both still run")
	require.NoError(t, syscall.Kill(pid, 0))

	found, err = pluginhost.EndProcessGroup(ctx, rec)
	require.NoError(t, err)
	require.True(t, found)
	require.EqualError(t, cmd.Wait(), "signal: killed", "reaped here, its parent")
	requireGroupGone(t, pid) // its child too

	found, err = pluginhost.EndProcessGroup(ctx, rec)
	require.NoError(t, err)
	require.False(t, found, "gone")
}
