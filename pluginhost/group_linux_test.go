package pluginhost_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process the subreaper of every plugin process
// the tests start.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// requireGroupGone proves that no process of process group pgid exists any
// more. Every member still listed in /proc must exit within a few seconds
// (watched through a pidfd, no polling); as this test binary is the
// subreaper, each one is then reaped here. Finally kill(-pgid, 0) must
// report ESRCH.
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	require.Positive(t, pgid)
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range groupMembers(t, pgid) {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // already reaped
		}
		require.NoError(t, err, "pidfd_open(%d)", pid)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		_ = unix.Close(fd)
		require.NoError(t, err)
		require.Equal(t, 1, n, "process %d of group %d is still alive", pid, pgid)
		var ws unix.WaitStatus
		_, err = unix.Wait4(pid, &ws, 0, nil)
		if err != nil && !errors.Is(err, unix.ECHILD) {
			require.NoError(t, err, "wait4(%d)", pid)
		}
	}
	require.ErrorIs(t, unix.Kill(-pgid, 0), unix.ESRCH, "process group %d still has members", pgid)
}

// groupMembers lists the pids in /proc whose process group is pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ..."; comm may hold spaces and parens.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
