package main

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to unless to exists (EEXIST); EINVAL
// when the file system cannot tell (macOS says ENOTSUP: RENAME_EXCL).
func renameNoReplace(from, to string) error {
	err := unix.RenameatxNp(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_EXCL)
	if errors.Is(err, unix.ENOTSUP) {
		return unix.EINVAL
	}
	return err
}
