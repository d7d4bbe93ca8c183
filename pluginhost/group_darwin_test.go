package pluginhost_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// becomeSubreaper does nothing: outside Linux, an orphaned grandchild goes
// to init (launchd), which reaps it.
func becomeSubreaper() error { return nil }

// requireGroupGone proves that no process of process group pgid exists any
// more: kill(-pgid, 0) must report ESRCH within a few seconds (there is no
// pidfd to wait on here: it is asked again every few milliseconds).
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	require.Positive(t, pgid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Kill(-pgid, 0)
		if errors.Is(err, unix.ESRCH) {
			return
		}
		require.True(t, time.Now().Before(deadline), "process group %d still has members (kill: %v)", pgid, err)
		time.Sleep(5 * time.Millisecond)
	}
}

// groupMembers lists the pids in the kernel's process table whose process
// group is pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	require.NoError(t, err)
	pids := make([]int, 0, len(procs))
	for _, p := range procs {
		pids = append(pids, int(p.Proc.P_pid))
	}
	return pids
}
