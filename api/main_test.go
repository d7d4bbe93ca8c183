package api_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// server's streams, listeners and the ledgers under it must all stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
