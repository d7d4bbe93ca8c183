package daemon_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// lifecycleScript answers init, health and poll as config.mode says
// (ok, fail: init exits 1, hang: init sleeps, sick: health answers error),
// and appends the command it ran to runs.log in its directory.
const lifecycleScript = `#!/bin/sh
req=$(cat)
case "$req" in *'"command":"init"'*) cmd=init;; *'"command":"health"'*) cmd=health;; *) cmd=other;; esac
case "$req" in *'"mode":"fail"'*) mode=fail;; *'"mode":"hang"'*) mode=hang;; *'"mode":"sick"'*) mode=sick;; *) mode=ok;; esac
echo "$cmd" >> runs.log
if [ "$cmd" = init ] && [ "$mode" = fail ]; then echo "bad credentials" >&2; exit 1; fi
if [ "$cmd" = init ] && [ "$mode" = hang ]; then exec sleep 30; fi
if [ "$cmd" = health ] && [ "$mode" = sick ]; then printf '%s\n' '{"status":"error","error":"token expired"}'; exit 0; fi
printf '%s\n' '{"status":"ok","result":"fine"}'
`

// writeLifecyclePlugin writes a shell plugin named name under root with
// the given commands.
func writeLifecyclePlugin(t testing.TB, root, name string, commands ...string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + name +
		"\nversion: 1.0.0\nprotocol: 2\nentrypoint: run.sh\ncommands: [" + strings.Join(commands, ", ") + "]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(lifecycleScript), 0o755))
	return dir
}

// runsOf counts the runs of command the plugin in dir logged.
func runsOf(t *testing.T, dir, command string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "runs.log"))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if line == command {
			n++
		}
	}
	return n
}

func lifecycleConfig(root string, modes map[string]string) *config.Config {
	cfg := config.Default()
	cfg.PluginRoots = []string{root}
	for name, mode := range modes {
		pc := config.DefaultPlugin()
		pc.Config = map[string]any{"mode": mode}
		pc.Timeouts.Init = 500 * time.Millisecond
		pc.Retry.MaxAttempts = 1
		cfg.Plugins[name] = pc
	}
	return cfg
}

func openDaemon(t *testing.T, state string, cfg *config.Config) *daemon.Daemon {
	t.Helper()
	d, err := daemon.Open(context.Background(), daemon.Options{StateDir: state, Config: cfg, Grace: 100 * time.Millisecond,
		Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.NoError(t, err)
	return d
}

// initEvents returns the init events of plugin, oldest first.
func initEvents(t *testing.T, l *ledger.Ledger, plugin string) []ledger.Event {
	t.Helper()
	evs, err := l.ReadStream(context.Background(), events.PluginHealthStream(plugin))
	require.NoError(t, err)
	var out []ledger.Event
	for _, ev := range evs {
		if ev.Type == events.PluginInitialized || ev.Type == events.PluginInitFailed {
			out = append(out, ev)
		}
	}
	return out
}

// TestInitRunsOncePerConfig: init runs at the first start, not at a restart
// with the same config, again when the plugin's config changes; a failing
// or hanging init is recorded once, not retried, marks the plugin
// unhealthy, and the daemon starts and runs jobs (the failed plugin's too).
func TestInitRunsOncePerConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	good := writeLifecyclePlugin(t, root, "good", "poll", "init", "health")
	failing := writeLifecyclePlugin(t, root, "failing", "poll", "init")
	hanging := writeLifecyclePlugin(t, root, "hanging", "poll", "init")
	plain := writeLifecyclePlugin(t, root, "plain", "poll")
	cfg := lifecycleConfig(root, map[string]string{"good": "ok", "failing": "fail", "hanging": "hang", "plain": "ok"})

	// First start: every init runs once.
	d := openDaemon(t, state, cfg)
	require.Equal(t, 1, runsOf(t, good, "init"))
	require.Equal(t, 1, runsOf(t, failing, "init"), "a failed init is not retried")
	require.Equal(t, 1, runsOf(t, hanging, "init"), "a timed-out init is not retried")
	require.Equal(t, 0, runsOf(t, plain, "init"))

	goodInits := initEvents(t, d.Ledger, "good")
	require.Len(t, goodInits, 1)
	require.Equal(t, events.PluginInitialized, goodInits[0].Type)
	var ok events.InitializedData
	require.NoError(t, json.Unmarshal(goodInits[0].Data, &ok))
	require.Equal(t, "1.0.0", ok.Version)
	require.Len(t, ok.ConfigHash, 64)
	require.NotContains(t, string(goodInits[0].Data), `"mode"`, "the config values never enter the ledger")

	failed := initEvents(t, d.Ledger, "failing")
	require.Len(t, failed, 1)
	require.Equal(t, events.PluginInitFailed, failed[0].Type)
	var fd events.InitFailedData
	require.NoError(t, json.Unmarshal(failed[0].Data, &fd))
	require.Equal(t, events.OutcomeError, fd.Outcome)
	require.Equal(t, 1, fd.ExitCode)
	require.Contains(t, fd.Error, "exit 1")
	require.Contains(t, fd.Stderr, "bad credentials")

	hung := initEvents(t, d.Ledger, "hanging")
	require.Len(t, hung, 1)
	var hd events.InitFailedData
	require.NoError(t, json.Unmarshal(hung[0].Data, &hd))
	require.Equal(t, events.OutcomeTimeout, hd.Outcome)

	// The daemon runs jobs, the unhealthy plugin's included (they are not
	// held: a failed init marks the plugin, its jobs fail or not on their own).
	for _, name := range []string{"good", "failing", "plain"} {
		res, err := commands.EnqueueJob(ctx, d.Ledger, commands.JobFor(cfg, name, "poll", events.ActorCLI))
		require.NoError(t, err)
		waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		j, _, err := views.WaitJob(waitCtx, d.Ledger, res.JobID)
		cancel()
		require.NoError(t, err)
		require.Equal(t, events.StatusSucceeded, j.Status, name)
	}
	require.NoError(t, d.Close())

	// The projection shows each plugin's health.
	health := readHealth(t, state)
	require.Equal(t, events.Healthy, health.Of("good").Status)
	require.Equal(t, events.Unhealthy, health.Of("failing").Status)
	require.Contains(t, health.Of("failing").Summary, "unhealthy: init failed: exit 1")
	require.Equal(t, events.Unhealthy, health.Of("hanging").Status)
	require.Contains(t, health.Of("hanging").Summary, "timed out")
	require.Equal(t, views.HealthUnknown, health.Of("plain").Status)

	// A restart with the same config: a succeeded init is not run again;
	// a failed one is (a start or reload is the operator's retry).
	d = openDaemon(t, state, cfg)
	require.NoError(t, d.Close())
	require.Equal(t, 1, runsOf(t, good, "init"))
	require.Equal(t, 2, runsOf(t, failing, "init"))

	// The plugin's config changes: init runs again, with a new hash.
	cfg.Plugins["good"].Config["region"] = "eu"
	d = openDaemon(t, state, cfg)
	require.Equal(t, 2, runsOf(t, good, "init"))
	goodInits = initEvents(t, d.Ledger, "good")
	require.Len(t, goodInits, 2)
	var again events.InitializedData
	require.NoError(t, json.Unmarshal(goodInits[1].Data, &again))
	require.NotEqual(t, ok.ConfigHash, again.ConfigHash)
	require.NoError(t, d.Close())

	// The failed plugin's config is fixed: it becomes healthy.
	cfg.Plugins["failing"].Config["mode"] = "ok"
	d = openDaemon(t, state, cfg)
	require.NoError(t, d.Close())
	require.Equal(t, events.Healthy, readHealth(t, state).Of("failing").Status)

	requireReplayEqual(t, state)
}

// TestCheckHealth: a healthy, an unhealthy, a plugin without a health
// command and a disabled one; each run recorded and shown.
func TestCheckHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	good := writeLifecyclePlugin(t, root, "good", "poll", "health")
	writeLifecyclePlugin(t, root, "sick", "poll", "health")
	writeLifecyclePlugin(t, root, "plain", "poll")
	writeLifecyclePlugin(t, root, "off", "poll", "health")
	cfg := lifecycleConfig(root, map[string]string{"good": "ok", "sick": "sick", "plain": "ok", "off": "ok"})
	pc := cfg.Plugins["off"]
	pc.Enabled = false
	cfg.Plugins["off"] = pc

	d, err := daemon.OpenCore(ctx, daemon.CoreOptions{StateDir: state, Config: cfg})
	require.NoError(t, err)
	reports, err := daemon.CheckHealth(ctx, daemon.HealthOptions{Ledger: d.Ledger, Plugins: d.Plugins(), Config: cfg,
		Names: []string{"good", "sick", "plain", "off"}})
	require.NoError(t, err)
	require.Len(t, reports, 4)
	require.Equal(t, daemon.HealthReport{Plugin: "good", Status: events.Healthy, Message: "fine", DurationMS: reports[0].DurationMS}, reports[0])
	require.Equal(t, events.Unhealthy, reports[1].Status)
	require.Equal(t, "token expired", reports[1].Message)
	require.Equal(t, daemon.NoHealthCommand, reports[2].Status)
	require.Equal(t, daemon.HealthDisabled, reports[3].Status)
	require.Equal(t, 1, runsOf(t, good, "health"))

	_, err = daemon.CheckHealth(ctx, daemon.HealthOptions{Ledger: d.Ledger, Plugins: d.Plugins(), Config: cfg, Names: []string{"nope"}})
	require.ErrorIs(t, err, daemon.ErrUnknownPlugin)
	require.NoError(t, d.Close())

	health := readHealth(t, state)
	require.Equal(t, events.Healthy, health.Of("good").Status)
	require.Equal(t, "unhealthy: token expired", health.Of("sick").Summary)
	require.Nil(t, health.Of("plain").LastCheck, "no health command: nothing recorded")
	requireReplayEqual(t, state)
}

func readHealth(t *testing.T, state string) views.PluginHealthSet {
	t.Helper()
	l, err := ledger.Open(context.Background(), daemon.DBPath(state), ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	set, err := views.ListPluginHealth(context.Background(), l)
	require.NoError(t, err)
	return set
}

// requireReplayEqual compares the live projections with a fresh replay.
func requireReplayEqual(t *testing.T, state string) {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, daemon.DBPath(state), ledger.Options{})
	require.NoError(t, err)
	defer l.Close()
	scratch, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "scratch.db"), ledger.Options{})
	require.NoError(t, err)
	defer scratch.Close()
	mismatch, err := projections.Compare(ctx, l, scratch, nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)
}

// TestInitConfigHash: what counts as "its config changes".
func TestInitConfigHash(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeLifecyclePlugin(t, root, "p", "poll", "init")
	cfg := lifecycleConfig(root, map[string]string{"p": "ok"})
	d, err := daemon.OpenCore(context.Background(), daemon.CoreOptions{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg})
	require.NoError(t, err)
	defer d.Close()
	p, ok := d.Plugins().Get("p")
	require.True(t, ok)
	hash := func(c map[string]any) string {
		h, err := daemon.InitConfigHash(p, c)
		require.NoError(t, err)
		return h
	}
	base := hash(map[string]any{"a": 1, "b": map[string]any{"x": "y", "z": []any{1, 2}}})
	require.Equal(t, base, hash(map[string]any{"b": map[string]any{"z": []any{1, 2}, "x": "y"}, "a": 1}), "key order does not count")
	require.NotEqual(t, base, hash(map[string]any{"a": 2, "b": map[string]any{"x": "y", "z": []any{1, 2}}}), "a value counts")
	require.NotEqual(t, base, hash(map[string]any{"a": 1}), "a removed key counts")
	require.Equal(t, hash(nil), hash(map[string]any{}))
	version := p.Manifest.Version
	p.Manifest.Version = "2.0.0"
	require.NotEqual(t, base, hash(map[string]any{"a": 1, "b": map[string]any{"x": "y", "z": []any{1, 2}}}), "a new manifest version counts")
	p.Manifest.Version = version
}
