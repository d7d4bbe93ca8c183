package main_test

// End-to-end tests of what plugin run refuses before it enqueues anything,
// and of the payloads and commands it accepts.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeTestPlugin writes a shell plugin named name under root declaring
// commands (a YAML flow mapping) that answers ok; mode is its entrypoint's.
func writeTestPlugin(t *testing.T, root, name, commands string, mode os.FileMode) string {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + name +
		"\nversion: 0.1.0\nprotocol: 2\nentrypoint: run.sh\ncommands: " + commands + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	script := "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{\"status\":\"ok\",\"result\":\"" + name + "\"}'\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(dir, "run.sh"), mode))
	return dir
}

// ductileStdin runs the binary with stdin (nil env: cleanEnv).
func ductileStdin(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ductileBin, args...)
	cmd.Env = cleanEnv(t)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "ductile %q did not finish within %v", args, cmdTimeout)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run ductile %q: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// appliedData is the data of config.applied.
type appliedData struct {
	Reason  string `json:"reason"`
	PID     int    `json:"pid"`
	Plugins []struct {
		Name     string `json:"name"`
		Enabled  bool   `json:"enabled"`
		Commands []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"commands"`
	} `json:"plugins"`
	Skipped []struct {
		Name   string `json:"name"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// TestPluginRunRefusesUnknownTargets: an unknown plugin or command, a
// skipped plugin (named with the reason it was skipped) and a disabled one
// are refused before anything is enqueued, exit 1, with the nearest name
// suggested; without a daemon against the plugins found now, with one
// against the plugins it recorded it loaded (config.applied).
func TestPluginRunRefusesUnknownTargets(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS", "$SCRATCH/extra"]
plugins:
  echo: {config: {mode: ok, token: s3cret-token}}
  sink: {enabled: false}
`)
	extra := filepath.Join(w.scratch, "extra")
	writeTestPlugin(t, extra, "noexec", "{poll: {type: read}}", 0o644)

	refusals := []struct{ args, stderr []string }{
		{[]string{"ecko"}, []string{`ductile: no plugin named "ecko": did you mean "echo"? (`}},
		{[]string{"nosuch"}, []string{`ductile: no plugin named "nosuch" (`, "echo", "flaky"}},
		{[]string{"echo", "--command", "pol"}, []string{`ductile: plugin "echo" has no command "pol": did you mean "poll"? (its commands: poll, handle, health)`}},
		{[]string{"noexec"}, []string{`ductile: plugin "noexec" was not loaded: entrypoint run.sh is not executable: chmod +x ` + filepath.Join(extra, "noexec", "run.sh")}},
		{[]string{"sink", "--command", "handle"}, []string{`ductile: plugin "sink" is disabled in the config (plugins.sink.enabled: false)`}},
	}
	refuse := func(daemonRuns bool) {
		t.Helper()
		for _, tc := range refusals {
			for _, dry := range []bool{false, true} {
				args := append([]string{"plugin", "run"}, tc.args...)
				if dry {
					args = append(args, "--dry-run")
				}
				r := w.run(args...)
				require.Equal(t, 1, r.code, "%q (daemon %v):\n%s", args, daemonRuns, r)
				for _, s := range tc.stderr {
					require.Contains(t, r.stderr, s, "%q (daemon %v)", args, daemonRuns)
				}
				if daemonRuns && strings.HasPrefix(tc.stderr[0], "ductile: no plugin") {
					require.Contains(t, r.stderr, "plugins the daemon (pid ")
				}
				require.Empty(t, r.stdout)
			}
		}
	}

	refuse(false)
	d := w.startDaemon()
	refuse(true)

	// With a daemon running, what it loaded counts, not what is on disk
	// now: a plugin added since it started is refused (it would not run
	// it), saying that the daemon has not loaded it and how it would.
	writeTestPlugin(t, extra, "late", "{handle: {type: write}}", 0o755)
	r := w.run("plugin", "run", "late")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, fmt.Sprintf(`ductile: the daemon (pid %d) has not loaded plugin "late": it was not there when the daemon started or last reloaded, and the plugin roots of %s have it now`, d.pid(), w.config))
	require.Contains(t, r.stderr, "(load it with: ductile system reload")
	require.NotContains(t, r.stderr, "see: ductile plugin list", "plugin list shows it: the hint must not send there")

	// What the daemon recorded: its plugins and commands, enabled or not,
	// the skipped ones with the reason, and no config value.
	tail := mustRun(t, nil, w.args("ledger", "tail", "--type", "config.applied", "--json")...)
	lines := parseTail(t, tail.stdout)
	require.Len(t, lines, 1)
	require.Equal(t, "system", lines[0].Stream)
	require.NotContains(t, string(lines[0].Data), "s3cret")
	var applied appliedData
	require.NoError(t, json.Unmarshal(lines[0].Data, &applied))
	require.Equal(t, "start", applied.Reason)
	require.Equal(t, d.pid(), applied.PID)
	plugins := map[string]string{}
	for _, p := range applied.Plugins {
		var cmds []string
		for _, c := range p.Commands {
			cmds = append(cmds, c.Name+"("+c.Type+")")
		}
		plugins[p.Name] = strings.Join(cmds, " ")
		require.Equal(t, p.Name != "sink", p.Enabled, p.Name)
	}
	require.Equal(t, "poll(read) handle(write) health(read)", plugins["echo"])
	require.Equal(t, "handle(write)", plugins["sink"])
	require.NotContains(t, plugins, "noexec")
	require.Len(t, applied.Skipped, 1)
	require.Equal(t, "noexec", applied.Skipped[0].Name)
	require.Contains(t, applied.Skipped[0].Reason, "entrypoint run.sh is not executable")

	require.Equal(t, []jobView{}, w.jobList(), "nothing was enqueued")
	w.stopDaemon(d)

	// Without the daemon, the plugins found now count: late runs. It says
	// nothing of the broken plugin beside it (the daemon logs that; plugin
	// list and config check name it).
	var run runView
	r = w.runJSON(0, &run, "plugin", "run", "late", "--json")
	require.Equal(t, "succeeded", run.Status)
	require.Equal(t, "handle", run.Command, "its only command")
	require.Empty(t, r.stderr)
}

// TestPluginListNamesSkippedPlugins: plugin list shows each skipped plugin
// with its directory and the reason, as text and as JSON.
func TestPluginListNamesSkippedPlugins(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `plugin_roots: ["$SCRATCH/extra"]`)
	extra := filepath.Join(w.scratch, "extra")
	writeTestPlugin(t, extra, "good", "{poll: {type: read}}", 0o755)
	dir := writeTestPlugin(t, extra, "noexec", "{poll: {type: read}}", 0o644)

	var list struct {
		Plugins []struct {
			Name string `json:"name"`
		} `json:"plugins"`
		Skipped []struct {
			Name   string `json:"name"`
			Dir    string `json:"dir"`
			Reason string `json:"reason"`
		} `json:"skipped"`
		Problems []string `json:"problems"`
	}
	w.runJSON(0, &list, "plugin", "list", "--json")
	require.Len(t, list.Skipped, 1)
	require.Equal(t, "noexec", list.Skipped[0].Name)
	require.Equal(t, dir, list.Skipped[0].Dir)
	require.Equal(t, "entrypoint run.sh is not executable: chmod +x "+filepath.Join(dir, "run.sh"), list.Skipped[0].Reason)
	require.Empty(t, list.Problems)

	r := mustRun(t, nil, w.args("plugin", "list")...)
	require.Contains(t, r.stdout, "skipped noexec ("+dir+"): entrypoint run.sh is not executable")
}

// TestPluginRunDefaultCommand: without --command, a payload goes to handle
// when the plugin has it; else the plugin's only command runs; else poll.
func TestPluginRunDefaultCommand(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS", "$SCRATCH/extra"]
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	writeTestPlugin(t, filepath.Join(w.scratch, "extra"), "twins", "{a: {type: read}, b: {type: read}}", 0o755)
	for _, tc := range []struct {
		args    []string
		command string
	}{
		{[]string{"echo"}, "poll"},
		{[]string{"echo", "--payload", `{"x":1}`}, "handle"},
		{[]string{"echo", "--payload", `{"x":1}`, "--command", "poll"}, "poll"},
		{[]string{"sink"}, "handle"},
		{[]string{"twins", "--command", "b"}, "b"},
	} {
		var run runView
		w.runJSON(0, &run, append(append([]string{"plugin", "run"}, tc.args...), "--json")...)
		require.Equal(t, tc.command, run.Command, "%q", tc.args)
		require.Equal(t, "succeeded", run.Status, "%q", tc.args)
	}
	r := w.run("plugin", "run", "twins")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, `ductile: plugin "twins" has no command "poll" (the default; pick one with --command) (its commands: a, b)`)

	// A handle-only plugin given a payload through a daemon: it runs, it
	// does not die of an unknown poll.
	d := w.startDaemon()
	var run runView
	w.runJSON(0, &run, "plugin", "run", "sink", "--payload", `{"name":"Ada"}`, "--wait", "--timeout", "10s", "--json")
	require.Equal(t, "handle", run.Command)
	require.Equal(t, "succeeded", run.Status)
	w.stopDaemon(d)
}

// TestPluginRunPayloadSources: --payload @FILE and --payload - read a
// payload larger than an argument may be, checked as --payload is (a JSON
// object: commands.CheckPayload, the API's rule too); bad ones are usage
// errors that say what is wrong without echoing the payload, and
// touch nothing.
func TestPluginRunPayloadSources(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	file := func(name, content string) string {
		path := filepath.Join(w.scratch, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	big := strings.Repeat("x", 100<<10)
	for _, tc := range []struct {
		name    string
		payload string // the flag's value
		stdin   string
		stderr  string
	}{
		{"invalid JSON inline", `{"a":"` + big, "", `ductile: --payload is not valid JSON: unexpected end of JSON input at line 1, column 102406 (the text up to there ends "xxxxxxxxxxxx")`},
		{"invalid JSON in a file", "@" + file("bad.json", "{\n\"a\":\""+big+`",}`), "", `is not valid JSON: invalid character '}' looking for beginning of object key string at line 2, column 102408 (the text up to there ends "xxxxxxxxx\",}")`},
		{"invalid JSON on stdin", "-", `{"a":`, `ductile: --payload - (stdin) is not valid JSON: unexpected end of JSON input at line 1, column 5 (the text up to there ends "{\"a\":")`},
		{"a short payload is not quoted whole", `{"password":"hunter2", "x": [1,2,}`, "", `invalid character '}' looking for beginning of value at line 1, column 34 (the text up to there ends " \"x\": [1,2,}")`},
		{"@ with no file", "@", "", `ductile: --payload @ needs a file name: --payload @FILE reads the payload from FILE`},
		{"empty stdin", "-", "", `ductile: --payload - (stdin) is empty: give a JSON object, e.g. {}`},
		{"a list", `[1,2]`, "", `ductile: --payload must be a JSON object, like {"url": "…"} (a plugin reads its input as event.payload.<key>`},
		{"a string", `"x"`, "", `ductile: --payload must be a JSON object`},
		{"too deep", deep(1500), "", `ductile: --payload is too deep: it nests 1500 levels, and a payload may nest at most 500 (flatten it, or pass the plugin a path or a URL to the data)`},
		{"too deep even for encoding/json", "@" + file("deep.json", deep(20000)), "", `is too deep: it nests 20000 levels, and a payload may nest at most 500`},
		{"just too deep", deep(501), "", `ductile: --payload is too deep: it nests 501 levels`},
		{"missing file", "@" + filepath.Join(w.scratch, "nope.json"), "", `no such file or directory`},
		{"a directory", "@" + w.scratch, "", `is a directory: give a file holding the JSON`},
		{"not UTF-8", "@" + file("latin1.json", "{\"city\":\"Z\xfcrich\"}"), "", `is not valid UTF-8 (JSON text must be)`},
	} {
		r := ductileStdin(t, strings.NewReader(tc.stdin), w.args("plugin", "run", "sink", "--payload", tc.payload)...)
		require.Equal(t, 2, r.code, "%s: %s", tc.name, r)
		require.Contains(t, r.stderr, tc.stderr, tc.name)
		require.Less(t, len(r.stderr), 400, "%s: the payload is not echoed back: %s", tc.name, r.stderr)
		require.NotContains(t, r.stderr, "hunter2", tc.name)
	}
	require.NoDirExists(t, w.state, "refused before anything was opened")

	// The deepest payload that fits, and one larger than an argument can be.
	payload := `{"blob":"` + big + `","deep":` + deep(499) + `}`
	for _, source := range []struct{ flag, stdin string }{{"@" + file("ok.json", payload), ""}, {"-", payload}} {
		var run runView
		r := ductileStdin(t, strings.NewReader(source.stdin), w.args("plugin", "run", "sink", "--payload", source.flag, "--json")...)
		require.Equal(t, 0, r.code, "%s", r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))
		require.Equal(t, "succeeded", run.Status)
		require.Equal(t, "handle", run.Command)
		in := w.inspect(run.JobID)
		require.JSONEq(t, payload, string(in.Job.Payload))
	}
}
