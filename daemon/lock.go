package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked means another process holds the state directory's lock.
var ErrLocked = errors.New("another ductile daemon is running on this state directory")

// Lock holder roles, written after the PID in the lock file.
const (
	RoleDaemon = "daemon" // system start: runs every job
	RoleCLI    = "cli"    // plugin run without a daemon: runs only its own job
	RoleReplay = "replay" // ledger replay in place: rebuilds the projections
)

// LockError says which process holds the lock.
type LockError struct {
	Path string
	PID  int    // 0 if unknown
	Role string // RoleDaemon, RoleCLI or RoleReplay ("" if unknown)
}

func (e *LockError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "process " + strconv.Itoa(e.PID)
	}
	switch e.Role {
	case RoleCLI:
		who += " (a ductile plugin run)"
	case RoleReplay:
		who += " (a ductile ledger replay)"
	}
	return fmt.Sprintf("%v: %s holds %s (stop it, or use another --state-dir)", ErrLocked, who, e.Path)
}

func (e *LockError) Unwrap() error { return ErrLocked }

// Lock is a held flock on <state_dir>/ductile.lock. The kernel releases it
// when the process exits, however it exits, so a crash never leaves a stale lock.
type Lock struct{ f *os.File }

// LockPath is the lock file of a state directory.
func LockPath(stateDir string) string { return filepath.Join(stateDir, "ductile.lock") }

// AcquireLock takes the state directory's lock without waiting and writes
// our PID into it, or fails with a *LockError.
func AcquireLock(stateDir, role string) (*Lock, error) {
	path := LockPath(stateDir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	// A CLI probing with Holder holds a shared lock for microseconds; retry
	// briefly so such a probe never keeps a daemon from starting.
	for attempt := 0; ; attempt++ {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || !errors.Is(err, unix.EWOULDBLOCK) || attempt == 10 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid, holder := readHolder(f)
			return nil, &LockError{Path: path, PID: pid, Role: holder}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Until this write lands, the file still names the previous holder;
	// readHolder trusts it only once the PID in it is the lock's holder.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+role+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write pid to %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release lets go of the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Holder reports whether a daemon holds the state directory's lock, and its
// PID if so. It never blocks, never writes, and holds a shared lock only for
// the instant of the check (AcquireLock retries past such a probe).
func Holder(stateDir string) (h LockHolder, err error) {
	path := LockPath(stateDir)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return LockHolder{}, nil
	}
	if err != nil {
		return LockHolder{}, fmt.Errorf("check lock: %w", err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	switch {
	case errors.Is(err, unix.EWOULDBLOCK):
		pid, role := readHolder(f)
		return LockHolder{Held: true, PID: pid, Role: role}, nil
	case err != nil:
		return LockHolder{}, fmt.Errorf("check lock %s: %w", path, err)
	}
	return LockHolder{}, unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

// LockHolder is who holds a state directory's lock, if anyone.
type LockHolder struct {
	Held bool
	PID  int
	Role string // RoleDaemon, RoleCLI or RoleReplay
}

// Daemon reports whether the holder is a daemon that will run queued jobs.
// A holder that has not written its role yet (it does so just after taking
// the lock) is not known to be one: look again.
func (h LockHolder) Daemon() bool { return h.Held && h.Role == RoleDaemon }

// readHolder says who holds the exclusive flock on f's file: the PID the
// kernel reports for it, and the role the file names only if the file names
// that same PID. The file is rewritten just after the flock is taken, so
// until then it names the previous holder, likely dead; and anything may
// take the flock without writing at all (flock(1) in a backup script). A
// holder whose role is not known yet is not a daemon (see LockHolder.Daemon).
// Where the kernel does not say (no /proc/locks), a PID in the file counts
// only while that process exists.
func readHolder(f *os.File) (pid int, role string) {
	filePID, fileRole := parseHolder(f)
	pid, known := flockHolder(f)
	switch {
	case known && pid == filePID:
		return pid, fileRole
	case known:
		return pid, ""
	case filePID > 0 && processExists(filePID):
		return filePID, fileRole
	}
	return 0, ""
}

// parseHolder parses "PID ROLE" (an older lock file holds just the PID).
func parseHolder(f *os.File) (pid int, role string) {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	fields := strings.Fields(string(b[:n]))
	if len(fields) > 0 {
		pid, _ = strconv.Atoi(fields[0])
	}
	if len(fields) > 1 {
		role = fields[1]
	}
	return pid, role
}

// flockHolder reads the PID of the process holding an exclusive flock on
// f's file from /proc/locks (Linux), which lists every lock by device and
// inode with the PID that took it. known is false if the kernel does not say.
func flockHolder(f *os.File) (pid int, known bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, false
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false
	}
	// "1: FLOCK  ADVISORY  WRITE 2202 fe:00:9987273 0 EOF"; a waiter's line
	// has "->" after the number.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	for line := range strings.Lines(string(locks)) {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[3] != "WRITE" || fields[5] != file {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			return pid, true
		}
	}
	return 0, false
}

// processExists reports whether a process with this PID exists (it may be
// one this user cannot signal).
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
