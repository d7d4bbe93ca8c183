package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// lifecycleScript answers init and health as config.mode says: fail makes
// init exit 1, sick makes health answer an error; everything else is ok.
const lifecycleScript = `#!/bin/sh
req=$(cat)
case "$req" in *'"command":"init"'*) cmd=init;; *'"command":"health"'*) cmd=health;; *) cmd=other;; esac
case "$req" in *'"mode":"fail"'*) mode=fail;; *'"mode":"sick"'*) mode=sick;; *) mode=ok;; esac
if [ "$cmd" = init ] && [ "$mode" = fail ]; then echo "bad credentials" >&2; exit 1; fi
if [ "$cmd" = health ] && [ "$mode" = sick ]; then printf '%s\n' '{"status":"error","error":"token expired"}'; exit 0; fi
printf '%s\n' '{"status":"ok","result":"all good"}'
`

func writeShellPlugin(t *testing.T, root, name, commands string) {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + name +
		"\nversion: 1.0.0\nprotocol: 2\nentrypoint: run.sh\ncommands: [" + commands + "]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(lifecycleScript), 0o755))
}

// pluginListView is what plugin list --json prints, the parts checked here.
type pluginListView struct {
	Plugins []struct {
		Name   string `json:"name"`
		Health struct {
			Status  string `json:"status"`
			Summary string `json:"summary"`
			Init    *struct {
				Status     string `json:"status"`
				ConfigHash string `json:"config_hash"`
				Error      string `json:"error"`
			} `json:"init"`
			LastCheck *struct {
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"last_check"`
		} `json:"health"`
	} `json:"plugins"`
}

// TestPluginInitAndHealth: on the real binary, a daemon runs each plugin's
// init at start; a failed one shows as unhealthy in plugin list (text and
// JSON); plugin health runs health commands now and exits 1 when one is
// unhealthy.
func TestPluginInitAndHealth(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$SCRATCH/plugins"]
plugins:
  good: {config: {mode: ok}}
  broken: {config: {mode: fail}}
  sick: {config: {mode: sick}}
`)
	root := filepath.Join(w.scratch, "plugins")
	writeShellPlugin(t, root, "good", "poll, init, health")
	writeShellPlugin(t, root, "broken", "poll, init")
	writeShellPlugin(t, root, "sick", "poll, health")

	d := w.startDaemon()
	// The init ran before the daemon said it started, and logged the failure.
	line, _ := d.waitLine(t, 0, func(l string) bool { return strings.Contains(l, "plugin init failed") })
	require.Contains(t, line, `"plugin":"broken"`)

	list := func() pluginListView {
		var out pluginListView
		w.runJSON(0, &out, "plugin", "list", "--json")
		return out
	}
	health := map[string]string{}
	waitFor(t, waitTimeout, "plugin list to show both inits", func() bool {
		for _, p := range list().Plugins {
			health[p.Name] = p.Health.Summary
		}
		return health["good"] != "not checked" && health["broken"] != "not checked"
	})
	require.Equal(t, "healthy (initialized)", health["good"])
	require.Equal(t, "unhealthy: init failed: exit 1: bad credentials", health["broken"])
	require.Equal(t, "not checked", health["sick"])
	for _, p := range list().Plugins {
		if p.Name == "broken" {
			require.Equal(t, "unhealthy", p.Health.Status)
			require.Equal(t, "init_failed", p.Health.Init.Status)
			require.Len(t, p.Health.Init.ConfigHash, 64)
		}
	}
	text := w.run("plugin", "list")
	require.Equal(t, 0, text.code, "%s", text)
	require.Contains(t, text.stdout, "HEALTH")
	require.Regexp(t, `broken\s+1\.0\.0\s+.*unhealthy: init failed: exit 1: bad credentials`, text.stdout)

	// plugin health, while the daemon runs: one unhealthy plugin, exit 1.
	var out struct {
		Plugins []struct {
			Plugin  string `json:"plugin"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"plugins"`
	}
	w.runJSON(1, &out, "plugin", "health", "good", "sick", "broken", "--json")
	require.Len(t, out.Plugins, 3)
	require.Equal(t, "healthy", out.Plugins[0].Status)
	require.Equal(t, "all good", out.Plugins[0].Message)
	require.Equal(t, "unhealthy", out.Plugins[1].Status)
	require.Equal(t, "token expired", out.Plugins[1].Message)
	require.Equal(t, "no_health_command", out.Plugins[2].Status)

	// Only the healthy one: exit 0, in text.
	r := w.run("plugin", "health", "good")
	require.Equal(t, 0, r.code, "%s", r)
	require.Regexp(t, `good\s+healthy\s+\d+\s+all good`, r.stdout)

	// An unknown plugin is not found (exit 1 with the code).
	r = w.run("plugin", "health", "nope")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, `unknown plugin "nope"`)

	waitFor(t, waitTimeout, "plugin list to show the health check", func() bool {
		for _, p := range list().Plugins {
			if p.Name == "sick" {
				return p.Health.Summary == "unhealthy: token expired"
			}
		}
		return false
	})
	w.stopDaemon(d)

	// A restart with the same config runs only the failed init again.
	d = w.startDaemon()
	w.stopDaemon(d)
	tail := w.run("ledger", "tail", "--json", "--type", "plugin.initialized")
	require.Equal(t, 0, tail.code, "%s", tail)
	require.Equal(t, 1, strings.Count(tail.stdout, `"type":"plugin.initialized"`), tail.stdout)
	tail = w.run("ledger", "tail", "--json", "--type", "plugin.init_failed")
	require.Equal(t, 2, strings.Count(tail.stdout, `"type":"plugin.init_failed"`), tail.stdout)
	w.replayAndVerify()
}
