package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigCheck runs config check on the real config files under
// testdata/config/check, whose plugin roots are the fixture plugins: it
// exits 1 on any error (including a plugin skipped for its manifest and a
// route to a plugin or command that is not there), and 0 with warnings for
// what is accepted but not used yet.
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("testdata", "config", "check"))
	require.NoError(t, err)
	for _, tc := range []struct {
		file     string
		code     int
		errors   []string
		warnings []string
		locked   bool // it holds webhooks: run from a locked copy (lockedCopy)
	}{
		{file: "ok.yaml", code: 0, warnings: []string{
			// ok.yaml routes echo back to itself: a warning, not an error.
			`ok.yaml:8: routes[1]: route cycle echo -> echo: a job may route back to a plugin it came from; service.max_route_depth (20) stops such a chain`,
		}},
		{file: "mistakes.yaml", code: 1,
			errors: []string{
				`skipped plugin "bad" (` + filepath.Join(dir, "broken-plugins", "bad") + `): invalid manifest: name "-bad" must start with an ASCII letter or digit and contain only ASCII letters, digits, '_', '-' and '.'`,
				`mistakes.yaml:4: plugins.ecko: no plugin named "ecko" was found, so these settings apply to nothing: did you mean echo? (see: ductile plugin list)`,
				`mistakes.yaml:10: routes[0].to: no plugin named "snik" was found, so every event this route matches would make a job that fails at once: did you mean sink? (see: ductile plugin list)`,
				`mistakes.yaml:11: routes[1].command: plugin "recorder" has no command "handel": did you mean handle? (its commands: poll, handle, notify)`,
				`mistakes.yaml:12: routes[2].from: no plugin named "nosuch" was found, so this route can never fire (see: ductile plugin list)`,
				`mistakes.yaml:13: routes[3].to: plugin "bad" was skipped (the reason is among the errors), so every event this route matches would make a job that fails at once`,
			},
			warnings: []string{
				`mistakes.yaml:5: plugins.gone: no plugin named "gone" was found, so this entry does nothing (it is disabled: harmless) (see: ductile plugin list)`,
				`mistakes.yaml:7: plugins.echo.config.mdoe: plugin "echo" does not declare this key: did you mean mode? (its config_keys: mode); it is passed on, but the plugin may never read it`,
				`mistakes.yaml:14: routes[4].to: plugin "sink" is disabled (plugins.sink.enabled: false): jobs this route makes fail at once`,
			}},
		{file: "unused.yaml", code: 0, locked: true},
		{file: "hooks.yaml", code: 0, warnings: []string{
			`hooks.yaml:6: pipelines[alert-on-failure].on-hook: no enabled plugin has notify_on_complete: true, so this pipeline never runs (job.failed fires only for such plugins' jobs): set plugins.<name>.notify_on_complete: true (configured plugins: echo) on the plugins whose jobs it should follow`,
		}},
		{file: "pipelines.yaml", code: 1,
			errors: []string{
				`pipelines.yaml:12: pipelines[bad].steps[step1].uses: plugin "sink" has no command "poll" (its commands: handle): write uses: plugin (runs handle) or plugin.command, naming one that is installed (see: ductile plugin list)`,
				`pipelines.yaml:13: pipelines[bad].steps[step2].uses: no plugin named "snik" was found (did you mean sink?): write uses: plugin (runs handle) or plugin.command, naming one that is installed (see: ductile plugin list)`,
				"pipelines.yaml:17: pipelines[bad].steps[gated].if.value: invalid regex \"(\": missing closing ): `(`: fix the pattern (Go RE2 syntax, see https://pkg.go.dev/regexp/syntax)",
			}},
		{file: "misspelt.yaml", code: 1,
			errors: []string{
				"misspelt.yaml:3: plugin: unknown key: did you mean plugins? (valid keys: api, include, pipelines, plugin_roots, plugins, routes, secrets, service, state_dir, tokens, topics, webhooks)",
				"misspelt.yaml:7: plugins.echo.retries: unknown key: did you mean retry? (valid keys: circuit_breaker, config, enabled, max_outstanding_polls, notify_on_complete, parallelism, retry, runs_on, schedules, timeouts); settings for the plugin itself go under config:",
				"misspelt.yaml:8: plugins.echo.retry.backoff: unknown key: did you mean backoff_base? (valid keys: backoff_base, max_attempts)",
				"misspelt.yaml:8: plugins.echo.retry.max-attempts: unknown key: did you mean max_attempts? (valid keys: backoff_base, max_attempts)",
				"misspelt.yaml:9: plugins.echo.timeout: unknown key: did you mean timeouts? (valid keys: circuit_breaker, config, enabled, max_outstanding_polls, notify_on_complete, parallelism, retry, runs_on, schedules, timeouts); settings for the plugin itself go under config:",
				"misspelt.yaml:11: routes[0].event: unknown key: did you mean event_type? (valid keys: command, event_type, from, to)",
				"misspelt.yaml:11: routes[0].event_type: missing: give the event type to match exactly, e.g. echo.done",
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, tc.file)
			if tc.locked {
				path = lockedCopy(t, path)
			}
			args := []string{"config", "check", "--config", path, "--state-dir", t.TempDir()}
			r := ductile(t, nil, append(args, "--json")...)
			require.Equal(t, tc.code, r.code, "%s", r)
			var out struct {
				OK       bool     `json:"ok"`
				Errors   []string `json:"errors"`
				Warnings []string `json:"warnings"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), "%s", r)
			require.Equal(t, tc.code == 0, out.OK)
			require.Equal(t, append([]string{}, tc.errors...), out.Errors)
			require.Equal(t, append([]string{}, tc.warnings...), out.Warnings)

			// The text form says the same.
			r = ductile(t, nil, args...)
			require.Equal(t, tc.code, r.code, "%s", r)
			if tc.code == 0 {
				require.Contains(t, r.stdout, "config OK: ")
			} else {
				require.Contains(t, r.stdout, "problem(s):\n")
				require.NotContains(t, r.stdout, "config OK")
			}
			for _, line := range append(tc.errors, tc.warnings...) {
				require.Contains(t, r.stdout, "  "+line+"\n")
			}
		})
	}
}

// TestDaemonWarnsOfUnusedSections: the daemon starts on a config with
// sections nothing reads yet, and says so at WARN, one line each.
func TestDaemonWarnsOfUnusedSections(t *testing.T) {
	t.Parallel()
	cfg, err := filepath.Abs(filepath.Join("testdata", "config", "check", "unused.yaml"))
	require.NoError(t, err)
	p := start(t, nil, "system", "start", "--config", lockedCopy(t, cfg), "--state-dir", t.TempDir())
	_, started := p.waitLine(t, 0, messageIs("ductile started"))
	lines, _ := p.snapshot()
	var paths []string
	for _, line := range lines[:started] {
		var l struct {
			Level, Message, Path, At string
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "config section not used yet" {
			require.Equal(t, "WARN", l.Level)
			paths = append(paths, l.Path+" "+l.At)
		}
	}
	require.Empty(t, paths, "every section is read now (pipelines are compiled)")
	require.Equal(t, 0, p.signal(t, syscall.SIGTERM))
}

// TestConfigShowRedactsCredentials: config show, YAML and JSON, hides the
// credentials inside URLs and DSNs and keeps the rest readable.
func TestConfigShowRedactsCredentials(t *testing.T) {
	t.Parallel()
	cfg := lockedCopy(t, filepath.Join("testdata", "config", "show-secrets.yaml"))
	for _, args := range [][]string{{"config", "show"}, {"config", "show", "--json"}} {
		r := mustRun(t, nil, append(args, "--config", cfg, "--state-dir", t.TempDir())...)
		for _, secret := range []string{"s3cret", "pa55word", "pr0xy", "l1bpq", "fwdpass", "app:", "user:", "proxyuser", "hook:", "sup3rsecret"} {
			require.NotContains(t, r.stdout, secret, "%v", args)
		}
		for _, kept := range []string{"postgres://[redacted]@db/app", "https://[redacted]@host.example/x", "[redacted]@proxy:3128",
			"host=db user=app password=[redacted] dbname=app", "https://[redacted]@relay.example/in"} {
			require.Contains(t, r.stdout, kept, "%v", args)
		}
	}
}

// lockedCopy copies the config file src (one file, no includes) to a
// temporary directory, 0600 as ductile writes files, its relative
// plugin_roots ../../plugins made absolute, and runs config lock on it as
// a user would: a config holding webhooks: or secrets: loads only locked,
// and a checkout's file modes are whatever its umask gave.
func lockedCopy(t *testing.T, src string) string {
	t.Helper()
	body, err := os.ReadFile(src)
	require.NoError(t, err)
	plugins, err := filepath.Abs(filepath.Join("testdata", "plugins"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(body), "../../plugins", plugins)), 0o600))
	mustRun(t, nil, "config", "lock", "--config", path)
	return path
}
