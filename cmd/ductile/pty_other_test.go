//go:build !linux

package main_test

import (
	"os"
	"testing"
)

// openPTY skips the test: pseudo-terminals are opened here the Linux way
// only (TIOCSPTLCK, TIOCGPTN).
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	t.Skip("pseudo-terminals are opened by these tests on Linux only")
	return nil, nil
}
