package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

// TestLeasePeriodIsReadAtStartAndAReloadKeepsIt: service.lease_period is
// the Fleet's lease period from the daemon's start; a reload that changes
// it keeps the period in use and records a warning saying to restart.
func TestLeasePeriodIsReadAtStartAndAReloadKeepsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("service: {lease_period: 5s}\n"), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	d, err := daemon.Open(ctx, daemon.Options{StateDir: filepath.Join(dir, "state"), Config: cfg, Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, 5*time.Second, d.Engine().Fleet().LeasePeriod())

	require.NoError(t, os.WriteFile(path, []byte("service: {lease_period: 7s}\n"), 0o600))
	applied, err := d.Reload(ctx, false)
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, d.Engine().Fleet().LeasePeriod(), "a reload keeps the lease period")
	require.Contains(t, applied.Warnings,
		"service.lease_period changed in the config (7s): a reload keeps the lease period; restart the daemon to use it (in use: 5s)")

	// Unchanged: no warning.
	require.NoError(t, os.WriteFile(path, []byte("service: {lease_period: 5s}\n"), 0o600))
	applied, err = d.Reload(ctx, false)
	require.NoError(t, err)
	for _, w := range applied.Warnings {
		require.NotContains(t, w, "lease_period")
	}
}
