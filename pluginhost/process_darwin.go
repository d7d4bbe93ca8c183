package pluginhost

import (
	"fmt"
	"io/fs"
	"sync"

	"golang.org/x/sys/unix"
)

// The process table of macOS, read through sysctl (there is no /proc). A
// process's start time is the kernel's p_starttime in microseconds since
// the epoch (stat.startTicks, events.PluginProcess.StartTicks: on Linux,
// clock ticks since boot): either way, only compared with itself, on the
// machine and boot that recorded it.

// szomb is the kernel's p_stat of a zombie (SZOMB in sys/proc.h).
const szomb = 5

// readStat reads pid's entry of the kernel's process table.
func readStat(pid int) (stat, error) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pid", pid)
	if err != nil {
		return stat{}, fmt.Errorf("sysctl kern.proc.pid %d: %w", pid, err)
	}
	if len(procs) == 0 {
		return stat{}, &fs.PathError{Op: "sysctl", Path: fmt.Sprintf("kern.proc.pid.%d", pid), Err: fs.ErrNotExist}
	}
	return statOf(&procs[0]), nil
}

// statOf is what readStat keeps of a process's entry.
func statOf(p *unix.KinfoProc) stat {
	state := byte('R')
	if p.Proc.P_stat == szomb {
		state = 'Z'
	}
	start := p.Proc.P_starttime
	return stat{state: state, pgrp: int(p.Eproc.Pgid), startTicks: uint64(start.Sec)*1_000_000 + uint64(start.Usec)}
}

// groupRunning reports whether a process of group pgid is alive (not a
// zombie).
func groupRunning(pgid int) (bool, error) {
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		return false, fmt.Errorf("sysctl kern.proc.pgrp %d: %w", pgid, err)
	}
	for i := range procs {
		if statOf(&procs[i]).state != 'Z' {
			return true, nil
		}
	}
	return false, nil
}

// bootID is this boot's id: the kernel makes a new one at every boot.
var bootID = sync.OnceValues(func() (string, error) {
	id, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return "", fmt.Errorf("read boot id (sysctl kern.bootsessionuuid): %w", err)
	}
	return id, nil
})
