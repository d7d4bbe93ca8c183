package main_test

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// ledger replay in place under a running daemon is refused (it would race
// the daemon's own projector); into a new file it is fine.
func TestLedgerReplayInPlaceNeedsTheDaemonStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 5)
	d, _ := startDaemon(t, dir)

	r := ductile(t, nil, "ledger", "replay", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "stop it before replaying in place, or replay into a new file with --out")

	out := t.TempDir() + "/copy.db"
	r = ductile(t, nil, "ledger", "replay", "--state-dir", dir, "--out", out)
	require.Equal(t, 0, r.code, "%s", r)

	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
	r = ductile(t, nil, "ledger", "replay", "--state-dir", dir)
	require.Equal(t, 0, r.code, "%s", r)
}
