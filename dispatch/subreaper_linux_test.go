package dispatch_test

import "golang.org/x/sys/unix"

// becomeSubreaper makes this process the subreaper of every plugin process
// the tests start.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
