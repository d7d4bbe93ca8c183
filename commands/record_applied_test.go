package commands_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// Given a daemon that applied a config, when it is recorded, then
// config.applied is on the system stream by the daemon and its seq is
// returned; a record without the daemon's pid or a reason is refused.
func TestRecordApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mark := b.mark(t)
	a := events.ConfigAppliedData{Reason: "reload", PID: 42, Plugins: []events.AppliedPlugin{}, Skipped: []events.SkippedPlugin{}, Through: 7}
	data, err := json.Marshal(a) // the record is the data as given
	require.NoError(t, err)
	require.Contains(t, string(data), `"reason":"reload","pid":42`)
	seq, err := commands.RecordApplied(b.ctx, b.l, a)
	require.NoError(t, err)
	got := b.since(t, mark)
	requireEvents(t, []want{{Stream: events.SystemStream, Version: 1, Type: events.ConfigApplied,
		Data: string(data),
		Meta: `{"actor":"daemon"}`}}, got)
	require.Equal(t, got[0].Seq, seq)

	mark = b.mark(t)
	_, err = commands.RecordApplied(b.ctx, b.l, events.ConfigAppliedData{Reason: "start"})
	require.ErrorIs(t, err, commands.ErrInvalidCommand, "no pid")
	_, err = commands.RecordApplied(b.ctx, b.l, events.ConfigAppliedData{PID: 42})
	require.ErrorIs(t, err, commands.ErrInvalidCommand, "no reason")
	require.Empty(t, b.since(t, mark))
}
