package main_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// breakerView is a breaker as system breaker --json prints it.
type breakerView struct {
	Plugin     string  `json:"plugin"`
	Command    string  `json:"command"`
	State      string  `json:"state"`
	Failures   int     `json:"failures"`
	Threshold  int     `json:"threshold"`
	OpenedAt   *string `json:"opened_at"`
	ProbeAt    *string `json:"probe_at"`
	LastJobID  *string `json:"last_job_id"`
	LastError  *string `json:"last_error"`
	UpdatedSeq int64   `json:"updated_seq"`
	History    []struct {
		From   *string `json:"from"`
		To     string  `json:"to"`
		Reason string  `json:"reason"`
		JobID  *string `json:"job_id"`
		Actor  *string `json:"actor"`
	} `json:"history"`
}

func (w *jobWorld) breakers(args ...string) []breakerView {
	w.t.Helper()
	var out struct {
		Breakers []breakerView `json:"breakers"`
	}
	w.runJSON(0, &out, append([]string{"system", "breaker", "--json"}, args...)...)
	return out.Breakers
}

// A failing plugin's scheduled jobs open its breaker after the threshold;
// system breaker shows it open with its history; a job from the CLI of the
// same plugin and command still runs (and its success does not close it);
// system reset --dry-run changes nothing; system reset closes it.
func TestBreakerOpensShowsAndResets(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  breakable:
    retry: {max_attempts: 1}
    circuit_breaker: {threshold: 2, reset_after: 1h}
    config: {dir: "$SCRATCH"}
`)
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "broken"), nil, 0o600))
	d := w.startDaemon()

	// There is no scheduler yet: the test enqueues what it would, as
	// submitted by the scheduler, on the ledger the daemon runs.
	ctx := context.Background()
	l, err := ledger.Open(ctx, daemon.DBPath(w.state), ledger.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	var scheduled []string
	for range 2 {
		res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "breakable", Command: "poll", SubmittedBy: events.ActorScheduler,
			MaxAttempts: 1, BackoffBase: time.Second, Now: time.Now()})
		require.NoError(t, err)
		scheduled = append(scheduled, res.JobID)
		require.Equal(t, "dead", w.waitSettled(res.JobID).Job.Status)
	}
	require.NoError(t, l.Close())

	var open breakerView
	waitFor(t, waitTimeout, "the breaker to show open", func() bool {
		bs := w.breakers("breakable")
		if len(bs) == 1 {
			open = bs[0]
		}
		return open.State == "open"
	})
	require.Equal(t, "poll", open.Command)
	require.Equal(t, 2, open.Failures)
	require.Equal(t, 2, open.Threshold)
	require.Equal(t, scheduled[1], *open.LastJobID)
	require.Equal(t, "breakable: upstream is down", *open.LastError)
	opened, err := time.Parse(time.RFC3339Nano, *open.OpenedAt)
	require.NoError(t, err)
	probe, err := time.Parse(time.RFC3339Nano, *open.ProbeAt)
	require.NoError(t, err)
	require.Equal(t, time.Hour, probe.Sub(opened))
	require.Len(t, open.History, 1)
	require.Equal(t, "closed", *open.History[0].From)
	require.Equal(t, "open", open.History[0].To)
	require.Equal(t, "failure_threshold", open.History[0].Reason)
	text := w.run("system", "breaker")
	require.Equal(t, 0, text.code, text.String())
	require.Contains(t, text.stdout, "breakable  poll     open   2 in a row")
	require.Contains(t, text.stdout, "closed → open  failure_threshold")

	// A job from the CLI is not held back, and its success counts for nothing.
	require.NoError(t, os.Remove(filepath.Join(w.scratch, "broken")))
	var run runView
	w.runJSON(0, &run, "plugin", "run", "breakable", "--command", "poll", "--wait", "--json")
	require.Equal(t, "succeeded", run.Status)
	require.Equal(t, "open", w.breakers("breakable")[0].State)

	// --dry-run says what it would do and does nothing.
	var dry struct {
		DryRun   bool `json:"dry_run"`
		Breakers []struct {
			Command     string `json:"command"`
			StateBefore string `json:"state_before"`
			State       string `json:"state"`
			Reset       bool   `json:"reset"`
		} `json:"breakers"`
	}
	w.runJSON(0, &dry, "system", "reset", "breakable", "--dry-run", "--json")
	require.True(t, dry.DryRun)
	require.Len(t, dry.Breakers, 1)
	require.True(t, dry.Breakers[0].Reset)
	require.Equal(t, "open", dry.Breakers[0].StateBefore)
	after := w.breakers("breakable")[0]
	require.Equal(t, "open", after.State)
	require.Equal(t, open.UpdatedSeq, after.UpdatedSeq)

	// Names the daemon did not load are not_found, not "all closed"; a
	// command of the plugin with no breaker row is closed, said precisely.
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"system", "reset", "breakabl"}, 1, `ductile: no plugin named "breakabl": did you mean "breakable"? (plugins the daemon`},
		{[]string{"system", "breaker", "nosuch"}, 1, `ductile: no plugin named "nosuch" (plugins the daemon`},
		{[]string{"system", "reset", "breakable", "--command", "pol", "--dry-run"}, 1, `ductile: plugin "breakable" has no command "pol": did you mean "poll"? (its commands: poll)`},
		{[]string{"system", "reset", "breakable", "--command"}, 2, "ductile: flag needs an argument: -command"},
		{[]string{"system", "breaker", "--history", "-1"}, 2, "ductile: --history must be 0 or more, got -1"},
	} {
		r := w.run(tc.args...)
		require.Equal(t, tc.code, r.code, "%q: %s", tc.args, r)
		require.True(t, strings.HasPrefix(r.stderr, tc.err), "%q: %s", tc.args, r)
		require.Empty(t, r.stdout)
	}
	require.Equal(t, open.UpdatedSeq, w.breakers("breakable")[0].UpdatedSeq)

	r := w.run("system", "reset", "breakable")
	require.Equal(t, 0, r.code, r.String())
	require.Equal(t, "reset breaker breakable poll: open with 2 failures → closed\n", r.stdout)
	var closed breakerView
	waitFor(t, waitTimeout, "the breaker to show closed", func() bool {
		closed = w.breakers("breakable")[0]
		return closed.State == "closed"
	})
	require.Equal(t, 0, closed.Failures)
	require.Len(t, closed.History, 2)
	require.Equal(t, "manual_reset", closed.History[0].Reason)
	require.Equal(t, "cli", *closed.History[0].Actor)

	// Resetting a closed breaker is a no-op that says so.
	r = w.run("system", "reset", "breakable", "--command", "poll")
	require.Equal(t, 0, r.code, r.String())
	require.Equal(t, "nothing to reset: breaker breakable poll is closed with no failures\n", r.stdout)
	r = w.run("system", "reset", "breakable")
	require.Equal(t, 0, r.code, r.String())
	require.Equal(t, "nothing to reset: every breaker of plugin breakable is closed with no failures\n", r.stdout)

	w.stopDaemon(d)
	w.replayAndVerify()
	runs, err := os.ReadFile(filepath.Join(w.scratch, "runs"))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(runs), "run"))
}
