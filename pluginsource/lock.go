package pluginsource

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockName is the lock file in a plugin root that add, update and remove
// hold while they change the root, so that two of them at once never lose
// each other's lines of .checksums. Discovery skips it (a dot-name).
const lockName = ".ductile-plugins.lock"

// lockRoot takes root's lock, waiting for another holder, and returns the
// function that releases it.
func lockRoot(root string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(root, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock plugin root: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock plugin root: %w", err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}
