package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// statusView is what system status --json prints.
type statusView struct {
	Daemon struct {
		Running bool   `json:"running"`
		PID     int    `json:"pid"`
		Since   string `json:"up_since"`
		Hash    string `json:"config_hash"`
		Reason  string `json:"applied_reason"`
	} `json:"daemon"`
	Plugins []struct {
		Name   string `json:"name"`
		Health struct {
			Status  string `json:"status"`
			Summary string `json:"summary"`
		} `json:"health"`
		NextRun *struct {
			Schedule string `json:"schedule"`
			Due      string `json:"due"`
		} `json:"next_run"`
	} `json:"plugins"`
	Queue  map[string]int64 `json:"queue"`
	Ledger struct {
		FileBytes int64 `json:"file_bytes"`
		Head      int64 `json:"head"`
		Lag       int64 `json:"projector_lag"`
	} `json:"ledger"`
}

// schedulerView is what system scheduler --json prints.
type schedulerView struct {
	Daemon struct {
		Running bool   `json:"running"`
		Reason  string `json:"applied_reason"`
	} `json:"daemon"`
	Schedules []struct {
		Plugin  string `json:"plugin"`
		ID      string `json:"id"`
		When    string `json:"when"`
		Breaker string `json:"breaker"`
		Next    *struct {
			Due string `json:"due"`
		} `json:"next"`
	} `json:"schedules"`
}

// TestSystemStatus: system status shows the running daemon with the hash of
// the config it applied, each plugin's health (checked now, or as last
// recorded with --no-health, which records nothing) and its next scheduled
// run, the queue and the ledger; system scheduler follows a reload.
func TestSystemStatus(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugins:\n  echo:\n    schedules: [{id: hourly, every: 1h}]\n")
	r := w.run("system", "status")
	require.Equal(t, 1, r.code, "no ledger yet: %s", r)
	require.NoDirExists(t, w.state, "a status of nothing creates nothing")

	d := w.startDaemon()
	var applied appliedView
	w.runJSON(0, &applied, "config", "show", "--applied", "--json")
	var st statusView
	w.runJSON(0, &st, "system", "status", "--json")
	require.True(t, st.Daemon.Running)
	require.Equal(t, d.pid(), st.Daemon.PID)
	require.NotEmpty(t, st.Daemon.Since)
	require.Equal(t, applied.Settings.Hash, st.Daemon.Hash)
	require.Equal(t, "start", st.Daemon.Reason)
	require.EqualValues(t, 0, st.Queue["queued"]+st.Queue["running"])
	require.Positive(t, st.Ledger.Head)
	require.Positive(t, st.Ledger.FileBytes)
	var echo = -1
	for i, p := range st.Plugins {
		if p.Name == "echo" {
			echo = i
		}
	}
	require.GreaterOrEqual(t, echo, 0, "echo is listed")
	require.Equal(t, "healthy", st.Plugins[echo].Health.Status)
	require.NotNil(t, st.Plugins[echo].NextRun)
	require.Equal(t, "echo/hourly", st.Plugins[echo].NextRun.Schedule)

	// --no-health reads what was recorded and records nothing.
	var a, b statusView
	w.runJSON(0, &a, "system", "status", "--no-health", "--json")
	w.runJSON(0, &b, "system", "status", "--no-health", "--json")
	require.Equal(t, a.Ledger.Head, b.Ledger.Head)
	require.Equal(t, "healthy", b.Plugins[echo].Health.Status)
	r = w.run("system", "status", "--no-health")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "running (pid")
	require.Contains(t, r.stdout, "echo/hourly")

	// A broken config file does not hide the daemon's status.
	good, err := os.ReadFile(w.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(w.config, []byte("plugins: [oops\n"), 0o600))
	var broken struct {
		statusView
		Warnings []string `json:"warnings"`
	}
	w.runJSON(0, &broken, "system", "status", "--json")
	require.True(t, broken.Daemon.Running)
	require.Len(t, broken.Warnings, 1)
	require.Contains(t, broken.Warnings[0], "health not checked: the config file is invalid")
	require.NoError(t, os.WriteFile(w.config, good, 0o600))

	// The scheduler view follows the daemon's applied config, not the file.
	require.NoError(t, os.WriteFile(w.config, []byte("plugins:\n  echo:\n    schedules: [{id: hourly, every: 2h}]\n"), 0o600))
	var sv schedulerView
	w.runJSON(0, &sv, "system", "scheduler", "--json")
	require.Len(t, sv.Schedules, 1)
	require.Equal(t, "every 1h", sv.Schedules[0].When, "not applied yet")
	require.Equal(t, "breaker closed", sv.Schedules[0].Breaker)
	w.run("system", "reload")
	w.runJSON(0, &sv, "system", "scheduler", "--json")
	require.Equal(t, "reload", sv.Daemon.Reason)
	require.Equal(t, "every 2h", sv.Schedules[0].When)
	w.stopDaemon(d)

	// No daemon: said so, and the file's schedules are shown.
	r = w.run("system", "status", "--no-health", "--json")
	require.Equal(t, 0, r.code, r.String())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.False(t, st.Daemon.Running)
	r = w.run("system", "scheduler")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "no daemon is running")
}

// TestReadCommandsWorkBesideABrokenConfig: with the state directory given,
// the read-only commands read the ledger although the config file does not
// load, and say so on stderr.
func TestReadCommandsWorkBesideABrokenConfig(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "")
	mustRun(t, nil, w.args("plugin", "run", "echo", "--json")...)
	require.NoError(t, os.WriteFile(w.config, []byte("plugins: [oops\n"), 0o600))
	for _, args := range [][]string{{"queue", "--json"}, {"job", "list", "--json"}, {"ledger", "verify", "--json"}, {"ledger", "tail", "--json"},
		{"system", "breaker", "--json"}, {"system", "scheduler", "--json"}} {
		r := w.run(args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r)
		require.True(t, json.Valid([]byte(r.stdout)) || strings.HasPrefix(r.stdout, "{"), "%v: %s", args, r.stdout)
		require.Contains(t, r.stderr, "warning: config not loaded", "%v", args)
	}
	// Without the state directory, the config is where it would be found.
	r := ductile(t, nil, "--config", w.config, "queue")
	require.Equal(t, 1, r.code, r.String())
}

// TestSystemStatusSaysWhenEveryWorkerIsBusy: with every worker held by a
// plugin that does not end, system status says so, and that a job of
// another plugin waits for a worker (issue 20, item 7).
func TestSystemStatusSaysWhenEveryWorkerIsBusy(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugin_roots: [$PLUGINS]\nservice: {max_workers: 1}\nplugins:\n  slow:\n    config: {dir: $SCRATCH}\n")
	d := w.startDaemon()
	defer w.stopDaemon(d)
	var slow, echo runView
	w.runJSON(0, &slow, "plugin", "run", "slow", "--json")
	w.waitInspect(slow.JobID, "slow running", func(in inspectView) bool { return in.Job.Status == "running" })
	w.runJSON(0, &echo, "plugin", "run", "echo", "--json")

	type workers struct {
		Max       int   `json:"max"`
		Busy      int64 `json:"busy"`
		Waiting   int64 `json:"waiting"`
		Saturated bool  `json:"saturated"`
	}
	var st struct {
		Workers *workers `json:"workers"`
	}
	w.runJSON(0, &st, "system", "status", "--no-health", "--json")
	require.Equal(t, &workers{Max: 1, Busy: 1, Waiting: 1, Saturated: true}, st.Workers)
	r := w.run("system", "status", "--no-health")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "workers   1 of 1 busy: every worker is busy while a job of another plugin waits for one")

	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "release"), nil, 0o600))
	w.waitSettled(echo.JobID)
	w.runJSON(0, &st, "system", "status", "--no-health", "--json")
	require.Equal(t, &workers{Max: 1}, st.Workers)
	r = w.run("system", "status", "--no-health")
	require.Contains(t, r.stdout, "workers   0 of 1 busy\n")
}
