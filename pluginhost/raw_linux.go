//go:build linux

package pluginhost

import (
	"syscall"
	"unsafe"
)

// The system calls of a run that never block (on non-blocking fds, or
// asking not to wait), made raw: not announced to the scheduler as calls
// that may block, which would wake its monitor thread each time the
// process comes back from idle.

func rawRead(fd int, b []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(n), errno
}

func rawWrite(fd int, b []byte) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(n), errno
}

func rawClose(fd int) {
	_, _, _ = syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0)
}

func setNonblock(fd int) error {
	// F_SETFL sets only the status flags: the access mode stays.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFL, syscall.O_NONBLOCK); errno != 0 {
		return errno
	}
	return nil
}
