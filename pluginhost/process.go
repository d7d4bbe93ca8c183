package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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

// groupRunning reports whether a process of group pgid is alive (not a
// zombie), looking at every process of the machine.
func groupRunning(pgid int) (bool, error) {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		if st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			return true, nil
		}
	}
	return false, nil
}

// stat is what the runner reads of /proc/<pid>/stat.
type stat struct {
	state      byte
	pgrp       int
	startTicks uint64
}

// readStat reads /proc/<pid>/stat (proc(5)). The command name, field 2,
// is in parentheses and may hold anything: the fields are counted after
// its last ')'. It is read with raw system calls into a buffer on the
// stack: the dispatcher reads it once per job (ProcessOf).
func readStat(pid int) (stat, error) {
	var buf [1024]byte
	b, err := readProcStat(pid, buf[:])
	if err != nil {
		return stat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// From field 3 (state) on: state, ppid, pgrp, … starttime (22).
	var fields [20][]byte
	n := 0
	for rest := b[i+1:]; n < len(fields); n++ {
		rest = bytes.TrimLeft(rest, " \n")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		fields[n], rest = rest[:end], rest[end:]
	}
	if n < len(fields) {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, n+2)
	}
	pgrp, err := strconv.Atoi(string(fields[5-3]))
	if err != nil {
		return stat{}, fmt.Errorf("/proc/%d/stat: pgrp: %w", pid, err)
	}
	start, err := strconv.ParseUint(string(fields[22-3]), 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return stat{state: fields[0][0], pgrp: pgrp, startTicks: start}, nil
}

// readProcStat is the content of /proc/<pid>/stat, in buf if it fits.
// The file is opened and read without blocking calls (procfs answers at
// once), so the scheduler's monitor thread is not woken for them.
func readProcStat(pid int, buf []byte) ([]byte, error) {
	path := fmt.Appendf(buf[:0], "/proc/%d/stat\x00", pid)
	cwd := unix.AT_FDCWD // (a negative constant)
	fd, _, errno := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(&path[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
	name := string(path[:len(path)-1])
	if errno != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errno}
	}
	defer rawClose(int(fd))
	n := 0
	for n < len(buf) {
		m, errno := rawRead(int(fd), buf[n:])
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return nil, &fs.PathError{Op: "read", Path: name, Err: errno}
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
	return os.ReadFile(name) // longer than buf: never in practice
}

// bootID is this boot's id: the kernel makes a new one at every boot.
var bootID = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
})
