package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// TestHandOffRecordsTheOutcomeThenTheNextStart: one job's outcome and the
// next job's start land in one transaction, the outcome first, so a next
// job of the same plugin starts with the state the outcome left.
func TestHandOffRecordsTheOutcomeThenTheNextStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("j1").started(1).events()...)
	b.given(t, job("j2").events()...)
	mark := b.mark(t)

	out := commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","state_updates":{"cursor":"b"}}`),
		StateUpdates: raw(`{"cursor":"b"}`)}
	res := commands.HandOff(b.ctx, b.l, commands.Handoff{
		Complete: commands.Complete{JobID: "j1", Attempt: 1, Outcome: out, Now: now},
		Next:     commands.Start{JobID: "j2", Timeout: time.Minute, Now: now},
	})
	require.NoError(t, res.CompleteErr)
	require.NoError(t, res.StartErr)
	require.Equal(t, events.StatusSucceeded, res.Completed.Status)
	require.Equal(t, "j2", res.Started.JobID)
	require.JSONEq(t, `{"cursor":"b"}`, string(res.Started.State), "the next start sees the state the outcome left")

	got := b.since(t, mark)
	require.Equal(t, []string{events.JobSucceeded, events.PluginStateMerged, events.JobStarted},
		[]string{got[0].Type, got[1].Type, got[2].Type}, "events: %s", describe(got))
	require.Len(t, got, 3)
	for _, ev := range got {
		require.Equal(t, got[0].RecordedAt, ev.RecordedAt, "one transaction (setup's clock ticks once per commit)")
	}
}

// TestHandOffAnswersEachHalf: a next start refused (the job started
// elsewhere) leaves the outcome recorded, and an outcome refused (the job
// moved on) leaves the next start recorded.
func TestHandOffAnswersEachHalf(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("j1").started(1).events()...)
	b.given(t, job("j2").started(1).events()...) // started elsewhere already
	b.given(t, job("j3").events()...)

	res := commands.HandOff(b.ctx, b.l, commands.Handoff{
		Complete: commands.Complete{JobID: "j1", Attempt: 1, Outcome: outOK, Now: now},
		Next:     commands.Start{JobID: "j2", Timeout: time.Minute, Now: now},
	})
	require.NoError(t, res.CompleteErr)
	require.ErrorIs(t, res.StartErr, commands.ErrInvalidTransition)
	require.Equal(t, events.StatusSucceeded, b.fold(t, "j1").Status)

	res = commands.HandOff(b.ctx, b.l, commands.Handoff{
		Complete: commands.Complete{JobID: "j1", Attempt: 1, Outcome: outOK, Now: now}, // recorded already
		Next:     commands.Start{JobID: "j3", Timeout: time.Minute, Now: now},
	})
	require.ErrorIs(t, res.CompleteErr, commands.ErrInvalidTransition)
	require.NoError(t, res.StartErr)
	require.Equal(t, events.StatusRunning, b.fold(t, "j3").Status)
}
