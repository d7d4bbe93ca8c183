//go:build linux

package pluginhost

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
