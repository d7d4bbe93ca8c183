package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked means another process holds the state directory's lock.
var ErrLocked = errors.New("another ductile daemon is running on this state directory")

// LockError says which process holds the lock.
type LockError struct {
	Path string
	PID  int // 0 if unknown
}

func (e *LockError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "process " + strconv.Itoa(e.PID)
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
func AcquireLock(stateDir string) (*Lock, error) {
	path := LockPath(stateDir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockError{Path: path, PID: readPID(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("write pid to %s: %w", path, err)
		}
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
// PID if so. It never blocks and never takes the lock for longer than the check.
func Holder(stateDir string) (running bool, pid int, err error) {
	if _, err := os.Stat(stateDir); errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	l, err := AcquireLock(stateDir)
	var le *LockError
	switch {
	case errors.As(err, &le):
		return true, le.PID, nil
	case err != nil:
		return false, 0, err
	}
	return false, 0, l.Release()
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
