package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// reloadView is what system reload --json prints.
type reloadView struct {
	OK        bool     `json:"ok"`
	DryRun    bool     `json:"dry_run"`
	Error     string   `json:"error"`
	Errors    []string `json:"errors"`
	Warnings  []string `json:"warnings"`
	Forceable bool     `json:"forceable"`
	Hash      string   `json:"hash"`
	Changes   []struct {
		Path    string `json:"path"`
		File    any    `json:"file"`
		Applied any    `json:"applied"`
	} `json:"changes"`
	Added   []string       `json:"plugins_added"`
	Removed []string       `json:"plugins_removed"`
	Ends    map[string]int `json:"queued_jobs_to_cancel"`
}

func (r reloadView) changed() []string {
	var paths []string
	for _, c := range r.Changes {
		paths = append(paths, c.Path)
	}
	return paths
}

// appliedView is what config show --applied --json prints.
type appliedView struct {
	PID      int             `json:"pid"`
	Running  bool            `json:"running"`
	Reason   string          `json:"reason"`
	Seq      int64           `json:"seq"`
	Settings events.Settings `json:"settings"`
}

// TestReload: on the real binary, an invalid config is refused with the
// old one kept (exit 1, code invalid_config), a dry run shows the change
// and changes nothing, and a valid reload applies at once: a plugin whose
// root left the config stops running, its queued jobs end canceled with the
// reason, its running job finishes with the settings it started with, and
// a CLI enqueue (no --config) takes the new max_attempts the daemon applied.
func TestReload(t *testing.T) {
	t.Parallel()
	plugins, err := filepath.Abs(filepath.Join("testdata", "plugins"))
	require.NoError(t, err)
	// A root each for slow and recorder, so that the new config can drop
	// slow's.
	slowRoot, recorderRoot := t.TempDir(), t.TempDir()
	for root, name := range map[string]string{slowRoot: "slow", recorderRoot: "recorder"} {
		out, err := exec.Command("cp", "-r", filepath.Join(plugins, name), root).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	w := newJobWorld(t, "")
	gate := filepath.Join(w.scratch, "gate")
	require.NoError(t, os.Mkdir(gate, 0o755))
	write := func(roots, attempts string) {
		body := "plugin_roots: [" + roots + "]\nservice: {max_workers: 1}\nplugins:\n" +
			"  recorder: {config: {dir: " + w.scratch + "}, retry: {max_attempts: " + attempts + "}}\n"
		if strings.Contains(roots, slowRoot) {
			// Its settings go with its root (an entry for a plugin not
			// found is an error: config check's, and a reload's).
			body += "  slow: {config: {dir: " + gate + "}}\n"
		}
		require.NoError(t, os.WriteFile(w.config, []byte(body), 0o600))
	}
	write(slowRoot+", "+recorderRoot, "2")
	d := w.startDaemon()

	var applied appliedView
	w.runJSON(0, &applied, "config", "show", "--applied", "--json")
	require.True(t, applied.Running)
	require.Equal(t, "start", applied.Reason)
	require.Equal(t, 2, applied.Settings.Plugins["recorder"].Retry.MaxAttempts)

	// One slow job holds the only worker; two more wait behind it.
	var running runView
	w.runJSON(0, &running, "plugin", "run", "slow", "--command", "poll", "--json")
	w.waitInspect(running.JobID, "the first slow job running", func(in inspectView) bool { return in.Job.Status == "running" })
	var queued [2]runView
	for i := range queued {
		w.runJSON(0, &queued[i], "plugin", "run", "slow", "--command", "poll", "--json")
	}

	// An invalid file: refused, the old config kept.
	require.NoError(t, os.WriteFile(w.config, []byte("plugins: [oops\n"), 0o600))
	r := w.run("system", "reload", "--json")
	require.Equal(t, 1, r.code, r.String())
	var refused reloadView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &refused), r.String())
	require.False(t, refused.OK)
	require.Contains(t, refused.Error, "invalid YAML")
	r = w.run("system", "reload")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, "kept its config")
	var still appliedView
	w.runJSON(0, &still, "config", "show", "--applied", "--json")
	require.Equal(t, applied.Seq, still.Seq, "a refused reload applies nothing")

	// The new config: slow's root dropped, recorder's max_attempts raised.
	write(recorderRoot, "5")
	// config show marks what differs from what the daemon applied.
	r = w.run("config", "show")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "max_attempts: 5 # applied: 2")
	var dry reloadView
	w.runJSON(0, &dry, "system", "reload", "--dry-run", "--json")
	require.True(t, dry.DryRun)
	require.Equal(t, []string{"slow"}, dry.Removed)
	require.Equal(t, map[string]int{"slow": 2}, dry.Ends)
	require.Contains(t, dry.changed(), "plugins.recorder.retry.max_attempts")
	w.runJSON(0, &still, "config", "show", "--applied", "--json")
	require.Equal(t, applied.Seq, still.Seq, "a dry run applies nothing")

	var done reloadView
	w.runJSON(0, &done, "system", "reload", "--json")
	require.True(t, done.OK)
	require.Equal(t, []string{"slow"}, done.Removed)
	require.Equal(t, dry.Hash, done.Hash)
	var now appliedView
	w.runJSON(0, &now, "config", "show", "--applied", "--json")
	require.Equal(t, "reload", now.Reason)
	require.Equal(t, done.Hash, now.Settings.Hash)

	for _, q := range queued {
		in := w.waitInspect(q.JobID, "the queued slow job ended", func(in inspectView) bool { return in.Job.Status == "canceled" })
		require.NotNil(t, in.Job.LastError)
		require.Contains(t, *in.Job.LastError, `plugin "slow" was removed from the config by the reload`)
	}
	// The running one finishes with what it started with.
	require.NoError(t, os.WriteFile(filepath.Join(gate, "release"), nil, 0o644))
	w.waitInspect(running.JobID, "the running slow job finished", func(in inspectView) bool { return in.Job.Status == "succeeded" })

	// The CLI (no --config) builds jobs with what the daemon applied.
	var rec runView
	r = ductile(t, nil, "--state-dir", w.state, "plugin", "run", "recorder", "--command", "poll", "--json")
	require.Equal(t, 0, r.code, r.String())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	in := w.waitInspect(rec.JobID, "the recorder job done", func(in inspectView) bool { return in.Job.Status == "succeeded" })
	require.Equal(t, 5, in.Job.MaxAttempts)
	// slow is refused now, as the daemon no longer runs it.
	r = w.run("plugin", "run", "slow", "--command", "poll")
	require.NotEqual(t, 0, r.code, r.String())
	w.stopDaemon(d)
	w.replayAndVerify()
}

// TestReloadUnderLoadRunsEveryJobOnce: while the daemon works through 200
// jobs, ten SIGHUP reloads (alternating two valid configs) neither drop a
// job nor run one twice: every job succeeds on its first attempt and the
// plugin counts exactly 200 runs.
func TestReloadUnderLoadRunsEveryJobOnce(t *testing.T) {
	t.Parallel()
	const jobs = 200
	w := newJobWorld(t, "")
	write := func(workers int) {
		body := "plugin_roots: [" + mustAbs(t, filepath.Join("testdata", "plugins")) + "]\n" +
			"service: {max_workers: " + strconv.Itoa(workers) + "}\n" +
			"plugins:\n  recorder: {parallelism: 1, config: {dir: " + w.scratch + "}}\n"
		// Atomically, as an editor saves: a reload still reading the file
		// from the previous signal must not see it half written.
		tmp := w.config + ".tmp"
		require.NoError(t, os.WriteFile(tmp, []byte(body), 0o600))
		require.NoError(t, os.Rename(tmp, w.config))
	}
	write(2)
	d := w.startDaemon()
	cfg, err := config.Load(w.config)
	require.NoError(t, err)
	l := openLedger(t, w.state)
	ctx := context.Background()
	ids := make([]string, 0, jobs)
	for i := range jobs {
		if i%20 == 10 {
			write(1 + i/20%2)
			require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
		}
		enq := commands.JobFor(cfg, "recorder", "poll", events.ActorCLI)
		res, err := commands.EnqueueJob(ctx, l, enq)
		require.NoError(t, err)
		ids = append(ids, res.JobID)
	}
	waitFor(t, 60*time.Second, "every job to finish", func() bool {
		return len(w.jobList("--status", "succeeded", "--limit", "1000")) == jobs
	})
	for _, j := range w.jobList("--limit", "1000") {
		require.Equal(t, "succeeded", j.Status, j.ID)
		require.Equal(t, 1, j.Attempt, "job %s ran more than once", j.ID)
	}
	runs, err := os.ReadFile(filepath.Join(w.scratch, "runs"))
	require.NoError(t, err)
	require.Equal(t, "200", strings.TrimSpace(string(runs)), "the plugin ran as often as there were jobs")
	lines, _ := d.snapshot()
	reloads := 0
	for _, line := range lines {
		if strings.Contains(line, `"config reloaded"`) {
			reloads++
		}
	}
	require.Positive(t, reloads)
	w.stopDaemon(d)
	w.replayAndVerify()
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	return abs
}

// TestReloadReenablingAScheduleCatchesNothingUp: a schedule whose plugin a
// reload disables and a later one enables again does not make up for the
// time it was off, even under catch_up run_all: at most the firing due at
// the re-enable runs, not one per second it was off.
func TestReloadReenablingAScheduleCatchesNothingUp(t *testing.T) {
	t.Parallel()
	write := func(enabled bool) string {
		return "plugins:\n  echo:\n    enabled: " + strconv.FormatBool(enabled) + "\n" +
			"    schedules: [{every: 1s, command: handle, catch_up: run_all, if_running: queue}]\n"
	}
	w := newJobWorld(t, write(true))
	d := w.startDaemon()
	l := openLedger(t, w.state)
	fired := func() []events.ScheduleFiredData {
		evs, err := l.ReadStream(context.Background(), "schedule/echo/default")
		require.NoError(t, err)
		var out []events.ScheduleFiredData
		for _, ev := range evs {
			if ev.Type == events.ScheduleFired {
				var f events.ScheduleFiredData
				require.NoError(t, json.Unmarshal(ev.Data, &f))
				out = append(out, f)
			}
		}
		return out
	}
	waitFor(t, 10*time.Second, "two firings", func() bool { return len(fired()) >= 2 })

	require.NoError(t, os.WriteFile(w.config, []byte(write(false)), 0o600))
	mustRun(t, nil, w.args("system", "reload")...)
	off := time.Now()
	before := len(fired())
	// The scenario is a gap of real time with the schedule off.
	time.Sleep(4 * time.Second)
	require.Equal(t, before, len(fired()), "nothing fires while the plugin is disabled")

	require.NoError(t, os.WriteFile(w.config, []byte(write(true)), 0o600))
	mustRun(t, nil, w.args("system", "reload")...)
	on := time.Now()
	waitFor(t, 10*time.Second, "a firing after the re-enable", func() bool {
		for _, f := range fired() {
			if f.Slot.Due.After(on) {
				return true
			}
		}
		return false
	})
	inGap := 0
	for _, f := range fired() {
		if f.Slot.Due.After(off) && !f.Slot.Due.After(on) {
			inGap++
		}
	}
	require.LessOrEqual(t, inGap, 1, "at most the firing due at the re-enable runs: %d of the gap's firings ran", inGap)
	w.stopDaemon(d)
}
