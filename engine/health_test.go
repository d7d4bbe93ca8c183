package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/views"
)

// TestHealth: the report counts the enabled plugins applied and the queue,
// the uptime from the facts, and is degraded while the API should serve and
// does not; unavailable once the ledger cannot be read.
func TestHealth(t *testing.T) {
	f := setup(t, nil)
	f.queued(t)
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h, err := f.eng.Health(f.ctx, engine.HealthFacts{Started: started, Now: started.Add(90 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, "ok", h.Status)
	require.Equal(t, int64(90), h.UptimeSeconds)
	require.Equal(t, 1, h.PluginsLoaded, "echo: quiet is disabled, broken skipped")
	require.False(t, h.Writes.Failing)
	require.Nil(t, h.ProjectorLag)

	h, err = f.eng.Health(f.ctx, engine.HealthFacts{API: &views.APIState{Enabled: true, Off: "its address is taken"}})
	require.NoError(t, err)
	require.Equal(t, "degraded", h.Status)
	require.Zero(t, h.UptimeSeconds)

	require.NoError(t, f.l.Close())
	h, err = f.eng.Health(f.ctx, engine.HealthFacts{})
	require.Error(t, err)
	require.Equal(t, "unavailable", h.Status)
}
