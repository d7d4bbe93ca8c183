package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Given a plugin's health checks, when each is recorded, then it is
// plugin.health_checked on the plugin's health stream, by the CLI unless
// told; a status that is not a check's answer (no health command, disabled)
// is refused and nothing is appended.
func TestRecordHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark := b.mark(t)
	require.NoError(t, commands.RecordHealth(b.ctx, b.l, commands.HealthCheck{Plugin: "echo", Status: events.Healthy,
		Message: "all good", Outcome: events.OutcomeOK, RunID: "r1", Duration: 7 * time.Millisecond}))
	require.NoError(t, commands.RecordHealth(b.ctx, b.l, commands.HealthCheck{Plugin: "echo", Status: events.Unhealthy,
		Message: "no route", Outcome: events.OutcomeError, RunID: "r2", Duration: time.Second, Actor: events.ActorAPI}))
	requireEvents(t, []want{
		{Stream: events.PluginHealthStream("echo"), Version: 1, Type: events.PluginHealthChecked,
			Data: `{"status":"healthy","message":"all good","outcome":"ok","run_id":"r1","duration_ms":7}`, Meta: `{"actor":"cli"}`},
		{Stream: events.PluginHealthStream("echo"), Version: 2, Type: events.PluginHealthChecked,
			Data: `{"status":"unhealthy","message":"no route","outcome":"error","run_id":"r2","duration_ms":1000}`, Meta: `{"actor":"api"}`},
	}, b.since(t, mark))

	mark = b.mark(t)
	err := commands.RecordHealth(b.ctx, b.l, commands.HealthCheck{Plugin: "echo", Status: "disabled", Outcome: events.OutcomeOK})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	require.Empty(t, b.since(t, mark))
}
