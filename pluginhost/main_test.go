package pluginhost_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins"
)

// bundledRoot holds the bundled plugins, unpacked once before any test runs:
// writing an executable while another test forks can make exec fail with
// ETXTBSY, so no test writes a file it then executes.
var bundledRoot string

func TestMain(m *testing.M) {
	// Become the subreaper of every plugin process the tests start, so an
	// orphaned grandchild is re-parented to this process and the tests can
	// reap it and prove (kill(-pgid, 0) == ESRCH) that its group is gone,
	// without depending on how promptly PID 1 reaps.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "pluginhost-bundled-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bundledRoot = dir
	if err := plugins.Unpack(dir); err != nil {
		fmt.Fprintln(os.Stderr, "unpack bundled plugins:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// fixture returns a Plugin for the script testdata/runner/<name>.sh. Run
// needs only Dir and Entrypoint; discovery is tested separately.
func fixture(t testing.TB, name string) *pluginhost.Plugin {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "runner"))
	require.NoError(t, err)
	return &pluginhost.Plugin{
		Name:       name,
		Dir:        dir,
		Entrypoint: filepath.Join(dir, name+".sh"),
		Manifest:   &pluginhost.Manifest{Name: name},
	}
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
