package main_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLedgerPrune runs jobs, then prunes their logs with a cutoff after
// they ended: --dry-run counts and changes nothing, the real prune records
// log.pruned and the logs go (the jobs stay), ledger verify still matches a
// fresh replay, and a second prune finds nothing and records nothing.
func TestLedgerPrune(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugin_roots: [\"$PLUGINS\"]\n")
	var ids []string
	for range 3 {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "echo", "--command", "poll", "--wait", "--json")
		require.Equal(t, "succeeded", run.Status)
		ids = append(ids, run.JobID)
	}
	type pruneView struct {
		Before string `json:"before"`
		Jobs   int64  `json:"jobs"`
		DryRun bool   `json:"dry_run"`
		Seq    int64  `json:"seq"`
	}
	// With the default retention (30 days) nothing is old enough.
	var p pruneView
	w.runJSON(0, &p, "ledger", "prune", "--dry-run", "--json")
	require.Zero(t, p.Jobs)

	// An age as archive takes it: none ended 30 days ago.
	w.runJSON(0, &p, "ledger", "prune", "--before", "30d", "--dry-run", "--json")
	require.Zero(t, p.Jobs)
	// A cutoff in the future is refused.
	future := w.run("ledger", "prune", "--before", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, 2, future.code, "%s", future)
	require.Contains(t, future.stderr, "is in the future")

	before := time.Now().UTC().Format(time.RFC3339Nano)
	w.runJSON(0, &p, "ledger", "prune", "--before", before, "--dry-run", "--json")
	require.Equal(t, pruneView{Before: before, Jobs: 3, DryRun: true}, p)
	require.Len(t, w.inspect(ids[0]).Attempts, 1, "a dry run prunes nothing")

	w.runJSON(0, &p, "ledger", "prune", "--before", before, "--json")
	require.Equal(t, int64(3), p.Jobs)
	require.False(t, p.DryRun)
	require.Positive(t, p.Seq)
	for _, id := range ids {
		in := w.inspect(id)
		require.Empty(t, in.Attempts, "the job's log is pruned")
		require.Equal(t, "succeeded", in.Job.Status, "the job stays")
	}
	tail := w.run("ledger", "tail", "--type", "log.pruned", "--json")
	require.Equal(t, 0, tail.code, "%s", tail)
	require.Contains(t, tail.stdout, `"jobs":3`)

	w.replayAndVerify()

	p = pruneView{}
	w.runJSON(0, &p, "ledger", "prune", "--before", before, "--json")
	require.Zero(t, p.Jobs)
	require.Zero(t, p.Seq, "nothing to prune: no event")

	bad := w.run("ledger", "prune", "--before", "yesterday")
	require.Equal(t, 2, bad.code, "%s", bad)
}

// TestLedgerPruneAndArchiveUseTheDaemonsSettings: given only --state-dir
// while a daemon runs, ledger prune and ledger archive apply the
// job_log_retention and dedupe_ttl the daemon applied, not the defaults
// (30d, 24h); with the daemon stopped, this process's config (defaults).
func TestLedgerPruneAndArchiveUseTheDaemonsSettings(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugin_roots: [\"$PLUGINS\"]\nservice: {job_log_retention: 1s, dedupe_ttl: 1s}\n")
	d := w.startDaemon()
	var run runView
	w.runJSON(0, &run, "plugin", "run", "echo", "--command", "poll", "--wait", "--json")
	require.Equal(t, "succeeded", run.Status)

	stateOnly := func(args ...string) result {
		return ductile(t, nil, append([]string{"--state-dir", w.state}, args...)...)
	}
	type pruneView struct {
		Jobs int64 `json:"jobs"`
	}
	waitFor(t, waitTimeout, "the job's log to pass the daemon's 1s retention", func() bool {
		r := stateOnly("ledger", "prune", "--dry-run", "--json")
		var p pruneView
		require.Equal(t, 0, r.code, "%s", r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), "%s", r)
		return p.Jobs == 1
	})
	r := stateOnly("ledger", "archive", "--before", "1s", "--dry-run", "--json")
	require.Equal(t, 0, r.code, "the daemon's 1s dedupe window, not 24h: %s", r)
	w.stopDaemon(d)

	// No daemon: this process's config, here the defaults.
	r = stateOnly("ledger", "prune", "--dry-run", "--json")
	require.Equal(t, 0, r.code, "%s", r)
	var p pruneView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), "%s", r)
	require.Zero(t, p.Jobs, "the default 30d retention")
	r = stateOnly("ledger", "archive", "--before", "1s", "--dry-run")
	require.Equal(t, 2, r.code, "%s", r)
	require.Contains(t, r.stderr, "service.dedupe_ttl 24h0m0s")
}
