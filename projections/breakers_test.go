package projections_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// TestBreakerReplayIsExact drives two breakers through every transition
// (failures, open, refused and admitted firings, a failed and a successful
// probe, a reset), projecting as it goes, then rebuilds from scratch: the
// dumps must be identical, and the rows say what the log says.
func TestBreakerReplayIsExact(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t, "ductile.db")
	p := projections.New(l, projections.Options{BatchSize: 3})
	settings := config.CircuitBreaker{Enabled: true, Threshold: 2, ResetAfter: time.Minute}
	now := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

	run := func(plugin, id string, by events.Actor, ok bool) {
		t.Helper()
		res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{JobID: id, Plugin: plugin, Command: "poll", SubmittedBy: by,
			MaxAttempts: 1, BackoffBase: time.Second, Now: now})
		require.NoError(t, err)
		st, err := commands.StartJob(ctx, l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Now: now})
		require.NoError(t, err)
		out := commands.Outcome{Kind: events.OutcomeOK, Response: json.RawMessage(`{"status":"ok","result":"ok"}`)}
		if !ok {
			out = commands.Outcome{Kind: events.OutcomeError, Error: "boom \"quoted\" ✗"}
		}
		_, err = commands.CompleteJob(ctx, l, commands.Complete{JobID: res.JobID, Attempt: st.Attempt, Outcome: out, Breaker: settings, Now: now})
		require.NoError(t, err)
		_, err = p.RunOnce(ctx)
		require.NoError(t, err)
	}
	admit := func(plugin, id string) commands.Admission {
		t.Helper()
		var adm commands.Admission
		_, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
			var evs []ledger.NewEvent
			var err error
			adm, evs, err = commands.AdmitScheduled(tx, plugin, "poll", settings, id, now)
			return evs, err
		})
		require.NoError(t, err)
		return adm
	}

	run("a", "", events.ActorScheduler, false)
	run("a", "", events.ActorCLI, false) // counts for nothing
	run("a", "", events.ActorScheduler, true)
	run("a", "", events.ActorScheduler, false)
	run("a", "", events.ActorScheduler, false) // opens
	run("b", "", events.ActorScheduler, false)
	run("b", "", events.ActorScheduler, false) // opens
	require.False(t, admit("a", "early").Allow)
	now = now.Add(time.Minute)
	require.True(t, admit("a", "a-probe-1").Probe)
	run("a", "a-probe-1", events.ActorScheduler, false) // reopens
	now = now.Add(time.Minute)
	require.True(t, admit("a", "a-probe-2").Probe)
	run("a", "a-probe-2", events.ActorScheduler, true) // closes
	_, err := commands.ResetBreaker(ctx, l, commands.Reset{Plugin: "b", Command: "poll", Actor: "alice", Now: now})
	require.NoError(t, err)
	run("b", "", events.ActorScheduler, false) // counts one after the reset

	catchUp(t, p)
	incremental, cp := dump(t, l)
	_, err = projections.Rebuild(ctx, l, 0)
	require.NoError(t, err)
	replayed, cp2 := dump(t, l)
	require.Equal(t, cp, cp2)
	require.True(t, bytes.Equal(incremental, replayed), "replay differs from incremental projection")
	mismatch, err := projections.Compare(ctx, l, openLedger(t, "scratch.db"), nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)

	section := func(name string) []map[string]any {
		var rows []map[string]any
		_, rest, ok := strings.Cut(string(replayed), "## "+name+"\n")
		require.True(t, ok, "dump has %s", name)
		rest, _, _ = strings.Cut(rest, "## ")
		for _, line := range strings.Split(strings.TrimSpace(rest), "\n") {
			var row map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &row))
			rows = append(rows, row)
		}
		return rows
	}
	breakers := section("circuit_breakers")
	require.Len(t, breakers, 2)
	require.Equal(t, []any{"a", "closed", 0.0, "a-probe-2"}, []any{breakers[0]["Plugin"], breakers[0]["State"], breakers[0]["Failures"], breakers[0]["LastJobID"]})
	require.Equal(t, []any{"b", "closed", 1.0}, []any{breakers[1]["Plugin"], breakers[1]["State"], breakers[1]["Failures"]})
	var history []string
	for _, r := range section("circuit_breaker_transitions") {
		history = append(history, fmt.Sprintf("%s %v→%v %v by %v", r["Plugin"], r["FromState"], r["ToState"], r["Reason"], r["Actor"]))
	}
	require.Equal(t, []string{
		"a closed→open failure_threshold by dispatcher",
		"b closed→open failure_threshold by dispatcher",
		"a open→half_open cooldown_elapsed by scheduler",
		"a half_open→open probe_failed by dispatcher",
		"a open→half_open cooldown_elapsed by scheduler",
		"a half_open→closed success by dispatcher",
		"b open→closed manual_reset by alice",
	}, history)
}
