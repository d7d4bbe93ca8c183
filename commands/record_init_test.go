package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Given a plugin's init runs, when each is recorded, then a success is
// plugin.initialized and a failure plugin.init_failed on the plugin's
// health stream, by the daemon unless told; an interrupted init or one
// without its config hash is refused and nothing is appended.
func TestRecordInit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark := b.mark(t)
	require.NoError(t, commands.RecordInit(b.ctx, b.l, commands.InitRun{Plugin: "echo", ConfigHash: "h1", Version: "1.0.0",
		RunID: "r1", Outcome: events.OutcomeOK, Duration: 1500 * time.Millisecond}))
	require.NoError(t, commands.RecordInit(b.ctx, b.l, commands.InitRun{Plugin: "echo", ConfigHash: "h2", Version: "1.0.0",
		RunID: "r2", Outcome: events.OutcomeError, Error: "exit status 3", ExitCode: 3, Stderr: "boom\n", Duration: 20 * time.Millisecond, Actor: "test"}))
	requireEvents(t, []want{
		{Stream: events.PluginHealthStream("echo"), Version: 1, Type: events.PluginInitialized,
			Data: `{"config_hash":"h1","version":"1.0.0","run_id":"r1","duration_ms":1500}`, Meta: `{"actor":"daemon"}`},
		{Stream: events.PluginHealthStream("echo"), Version: 2, Type: events.PluginInitFailed,
			Data: `{"config_hash":"h2","version":"1.0.0","run_id":"r2","error":"exit status 3","outcome":"error","exit_code":3,"stderr":"boom\n","duration_ms":20}`,
			Meta: `{"actor":"test"}`},
	}, b.since(t, mark))

	mark = b.mark(t)
	err := commands.RecordInit(b.ctx, b.l, commands.InitRun{Plugin: "echo", ConfigHash: "h3", Outcome: events.OutcomeCanceled})
	require.ErrorIs(t, err, commands.ErrInvalidCommand, "an interrupted init")
	err = commands.RecordInit(b.ctx, b.l, commands.InitRun{Plugin: "echo", Outcome: events.OutcomeOK})
	require.ErrorIs(t, err, commands.ErrInvalidCommand, "no config hash")
	require.Empty(t, b.since(t, mark))
}
