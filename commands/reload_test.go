package commands_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Given a daemon, when a reload is requested of it and it refuses one, then
// config.reload_requested (by the CLI unless told, its seq returned) and
// config.reload_failed (by the daemon) are on the system stream; either
// without the daemon's pid is refused.
func TestRequestReloadAndRecordFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark := b.mark(t)
	seq, err := commands.RequestReload(b.ctx, b.l, commands.ReloadRequest{PID: 42, Force: true})
	require.NoError(t, err)
	require.NoError(t, commands.RecordReloadFailed(b.ctx, b.l, events.ReloadFailedData{PID: 42, Through: seq,
		Error: "plugin \"x\" was not loaded", Errors: []string{"plugin \"x\" was not loaded"}, Forceable: true}))
	got := b.since(t, mark)
	requireEvents(t, []want{
		{Stream: events.SystemStream, Version: 1, Type: events.ConfigReloadRequested, Data: `{"pid":42,"force":true}`, Meta: `{"actor":"cli"}`},
		{Stream: events.SystemStream, Version: 2, Type: events.ConfigReloadFailed,
			Data: fmt.Sprintf(`{"pid":42,"through":%d,"error":"plugin \"x\" was not loaded","errors":["plugin \"x\" was not loaded"],"forceable":true}`, seq),
			Meta: `{"actor":"daemon"}`},
	}, got)
	require.Equal(t, got[0].Seq, seq)

	mark = b.mark(t)
	_, err = commands.RequestReload(b.ctx, b.l, commands.ReloadRequest{})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	err = commands.RecordReloadFailed(b.ctx, b.l, events.ReloadFailedData{Error: "x"})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	require.Empty(t, b.since(t, mark))
}
