package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/ductile/ductile/events"
)

// ProcessOf identifies the process pid by its start time and the boot
// (events.PluginProcess), as long as it has not been reaped.
func ProcessOf(pid int) (events.PluginProcess, error) {
	boot, err := bootID()
	if err != nil {
		return events.PluginProcess{}, err
	}
	st, err := readStat(pid)
	if err != nil {
		return events.PluginProcess{}, err
	}
	return events.PluginProcess{PGID: pid, StartTicks: st.startTicks, BootID: boot}, nil
}

// EndProcessGroup ends the process group p leads, if p is still there: a
// process of pid p.PGID that leads that group, started at p.StartTicks in
// this boot of the machine (so a pid reused since is never signaled). Its
// whole group gets SIGKILL, and EndProcessGroup returns once none of the
// group runs any more (zombies aside), or when ctx ends (with its error).
// found is false when p is gone, or can no longer be told apart (its
// leader has exited: the group's members, if any, are not signaled).
func EndProcessGroup(ctx context.Context, p events.PluginProcess) (found bool, err error) {
	boot, err := bootID()
	if err != nil {
		return false, err
	}
	if p.PGID <= 1 || p.StartTicks == 0 || p.BootID != boot {
		return false, nil // not of this boot: the machine restarted since
	}
	st, err := readStat(p.PGID)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if st.startTicks != p.StartTicks || st.pgrp != p.PGID {
		return false, nil // another process now, or it left its group
	}
	if err := syscall.Kill(-p.PGID, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return true, fmt.Errorf("end process group %d: %w", p.PGID, err)
	}
	// SIGKILL takes effect as each process is next scheduled, or leaves
	// the system call it is in: wait for it.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		running, err := groupRunning(p.PGID)
		if err != nil || !running {
			return true, err
		}
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("end process group %d: still running: %w", p.PGID, ctx.Err())
		case <-tick.C:
		}
	}
}

// stat is what the runner reads of a process: /proc/<pid>/stat on Linux
// (process_linux.go), the kernel's process table through sysctl on macOS
// (process_darwin.go).
type stat struct {
	state      byte
	pgrp       int
	startTicks uint64
}
