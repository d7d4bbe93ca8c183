package main_test

// End-to-end tests of what a reload and config check refuse, and of where
// a config's ${VAR} is needed: on the real binary, as a user meets them.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hookWorld is a daemon with a plugin greet of its own root, scheduled,
// routed to from echo and behind a webhook, its secret from $HOOK_SECRET.
type hookWorld struct {
	*jobWorld
	env    []string // with HOOK_SECRET, as the daemon's environment
	greet  string   // greet's entrypoint
	daemon *proc
	base   string // the webhook listener's URL
}

const hookSecret = "e2e-hook-secret"

// hookConfig is the config of newHookWorld with routes routes (YAML list
// items).
func hookConfig(root, routes string) string {
	return `plugin_roots: ["` + root + `"]
plugins:
  greet:
    schedules: [{every: 1h}]
routes:
` + routes + `webhooks:
  listen: 127.0.0.1:0
  endpoints:
    - {path: /hook/greet, plugin: greet, secret_ref: hook}
secrets:
  hook: ${HOOK_SECRET}
`
}

const greetRoute = "  - {from: echo, event_type: echo.handle, to: greet}\n"

func newHookWorld(t *testing.T) *hookWorld {
	t.Helper()
	root := t.TempDir()
	dir := writeTestPlugin(t, root, "greet", "{poll: {type: read}, handle: {type: write}}", 0o755)
	w := &hookWorld{jobWorld: newJobWorld(t, hookConfig(root, greetRoute)), env: cleanEnv(t, "HOOK_SECRET="+hookSecret),
		greet: filepath.Join(dir, "run.sh")}
	w.lock()
	w.daemon = start(t, w.env, w.args("system", "start")...)
	t.Cleanup(func() {
		if t.Failed() {
			lines, _ := w.daemon.snapshot()
			t.Logf("daemon log:\n%s", strings.Join(lines, "\n"))
		}
	})
	line, _ := w.daemon.waitLine(t, 0, messageIs("webhooks listening"))
	var listening struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &listening))
	w.base = "http://" + listening.Addr
	w.daemon.waitLine(t, 0, messageIs("ductile started"))
	return w
}

// lock records the config's hashes, as a user does after editing a config
// that holds webhooks and secrets.
func (w *hookWorld) lock() {
	w.t.Helper()
	r := ductile(w.t, w.env, w.args("config", "lock")...)
	require.Equal(w.t, 0, r.code, "%s", r)
}

// deliver posts a signed delivery to the webhook and returns its status
// and body.
func (w *hookWorld) deliver() (int, map[string]any) {
	w.t.Helper()
	const body = `{"hello":"webhook"}`
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(body))
	req, err := http.NewRequest(http.MethodPost, w.base+"/hook/greet", strings.NewReader(body))
	require.NoError(w.t, err)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(w.t, err)
	var out map[string]any
	require.NoError(w.t, json.Unmarshal(raw, &out), string(raw))
	return resp.StatusCode, out
}

// appliedSeq is the seq of the config the daemon applied last.
func (w *hookWorld) appliedSeq() int64 {
	w.t.Helper()
	var a appliedView
	w.runJSON(0, &a, "config", "show", "--applied", "--json")
	return a.Seq
}

// greetJobs are the jobs of greet.
func (w *hookWorld) greetJobs() []jobView {
	return w.jobList("--plugin", "greet")
}

// TestReloadRefusesWhatConfigCheckRejects: a reload whose config has
// errors (a plugin made unexecutable, a route to a plugin that is not
// there) is refused as a whole, every error printed, exit 1, its dry run
// alike: the old config keeps running, its schedule and its webhook too.
// A webhook whose plugin cannot run (chmod -x without a reload, or skipped
// by a forced reload) answers 503 unavailable and enqueues nothing;
// --force applies the config, each error printed as a warning, and a
// route to a plugin that does not run is dropped with the reason rather
// than making a job that dies.
func TestReloadRefusesWhatConfigCheckRejects(t *testing.T) {
	t.Parallel()
	w := newHookWorld(t)
	seq := w.appliedSeq()
	code, out := w.deliver()
	require.Equal(t, http.StatusAccepted, code, "%v", out)

	// The plugin becomes unexecutable while the daemon runs: the webhook
	// takes no work it cannot run.
	require.NoError(t, os.Chmod(w.greet, 0o644))
	code, out = w.deliver()
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	require.Equal(t, "unavailable", out["code"])
	jobs := len(w.greetJobs())

	// A typo in a route too; then a reload: refused, every error said.
	hooks := hookConfig(filepath.Dir(filepath.Dir(w.greet)), greetRoute+"  - {from: echo, event_type: echo.handle, to: greeet}\n")
	require.NoError(t, os.WriteFile(w.config, []byte(hooks), 0o600))
	w.lock()
	wantErrors := []string{
		`skipped plugin "greet" (` + filepath.Dir(w.greet) + `): entrypoint run.sh is not executable: chmod +x ` + w.greet,
		`routes[0].to: plugin "greet" was skipped`,
		`routes[1].to: no plugin named "greeet" was found`,
		`webhooks.endpoints[0].plugin: plugin "greet" was skipped`,
	}
	for _, args := range [][]string{{"system", "reload", "--dry-run"}, {"system", "reload"}} {
		r := ductile(t, w.env, w.args(args...)...)
		require.Equal(t, 1, r.code, "%q: %s", args, r)
		require.Contains(t, r.stderr, "has 4 error(s):")
		for _, e := range wantErrors {
			require.Contains(t, r.stderr, e, "%q", args)
		}
		require.Contains(t, r.stderr, "ductile system reload --force")
		require.NotContains(t, r.stdout, "reloaded")
	}
	var refused reloadView
	r := ductile(t, w.env, w.args("system", "reload", "--json")...)
	require.Equal(t, 1, r.code, "%s", r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &refused), "%s", r)
	require.False(t, refused.OK)
	require.Len(t, refused.Errors, 4)
	require.True(t, refused.Forceable)

	// The old config runs on: nothing applied, the schedule still there,
	// the webhook works again once the file is executable again.
	require.Equal(t, seq, w.appliedSeq(), "a refused reload applies nothing")
	var scheduler struct {
		Schedules []struct {
			Plugin string `json:"plugin"`
		} `json:"schedules"`
	}
	w.runJSON(0, &scheduler, "system", "scheduler", "--json")
	require.Len(t, scheduler.Schedules, 1)
	require.Equal(t, "greet", scheduler.Schedules[0].Plugin)
	require.Len(t, w.greetJobs(), jobs, "a refused delivery enqueues nothing")
	require.NoError(t, os.Chmod(w.greet, 0o755))
	code, out = w.deliver()
	require.Equal(t, http.StatusAccepted, code, "%v", out)

	// --force applies it: greet skipped, each error a warning.
	require.NoError(t, os.Chmod(w.greet, 0o644))
	r = ductile(t, w.env, w.args("system", "reload", "--force")...)
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "plugins removed or disabled: greet; forced past 4 error(s)")
	for _, e := range wantErrors {
		require.Contains(t, r.stderr, "warning: an error applied anyway (--force): ")
		require.Contains(t, r.stderr, e)
	}
	require.Greater(t, w.appliedSeq(), seq)
	jobs = len(w.greetJobs())
	code, out = w.deliver()
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	require.Equal(t, "unavailable", out["code"])

	// echo's event routes to greet (skipped) and greeet (absent): both
	// dropped with the reason, no job made to die.
	var echo runView
	w.runJSON(0, &echo, "plugin", "run", "echo", "--payload", `{"n":1}`, "--wait", "--json")
	require.Equal(t, "succeeded", echo.Status)
	var in struct {
		Dropped []struct {
			Plugin string `json:"plugin"`
			Reason string `json:"reason"`
		} `json:"dropped_routes"`
		Children []jobView `json:"children"`
	}
	w.runJSON(0, &in, "job", "inspect", echo.JobID, "--json")
	require.Empty(t, in.Children)
	require.Len(t, in.Dropped, 2, "%+v", in.Dropped)
	require.Equal(t, "greet", in.Dropped[0].Plugin)
	require.Contains(t, in.Dropped[0].Reason, `plugin "greet" was not loaded: entrypoint run.sh is not executable`)
	require.Equal(t, "greeet", in.Dropped[1].Plugin)
	require.Contains(t, in.Dropped[1].Reason, `plugin "greeet" is not installed`)
	r = w.run("job", "inspect", echo.JobID)
	require.Contains(t, r.stdout, `dropped    route echo.handle -> greet handle: plugin "greet" was not loaded`)
	require.Len(t, w.greetJobs(), jobs, "nothing enqueued for greet")
}

// TestSecretsAreNeededOnlyWhereUsed: a config's ${VAR} is resolved by what
// uses its value. In a shell without the variables, the commands that talk
// to the running daemon work (plugin run, pipeline list, config check and
// show, config lock, system reload and its dry run), a plugin run this
// command would run itself is refused only for a variable of that
// plugin's own config, and a daemon started from that shell is refused
// with the variable named.
func TestSecretsAreNeededOnlyWhereUsed(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  echo: {config: {mode: "${ECHO_MODE}"}}
pipelines:
  - name: hello
    steps: [{uses: echo}]
webhooks:
  listen: 127.0.0.1:0
  endpoints:
    - {path: /hook/echo, plugin: echo, secret_ref: hook}
secrets:
  hook: ${HOOK_SECRET}
`)
	bare := cleanEnv(t) // a shell without either variable
	withSecret := cleanEnv(t, "HOOK_SECRET=s3cret")
	both := cleanEnv(t, "HOOK_SECRET=s3cret", "ECHO_MODE=ok")
	run := func(env []string, args ...string) result {
		t.Helper()
		return ductile(t, env, w.args(args...)...)
	}
	// Locking needs none of the values.
	r := run(bare, "config", "lock")
	require.Equal(t, 0, r.code, "%s", r)

	// No daemon: this command would run echo itself, so echo's variable
	// is needed, and only it.
	r = run(withSecret, "plugin", "run", "echo", "--wait")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "no daemon is running, so this command would run the job of echo itself")
	require.Contains(t, r.stderr, "plugins.echo.config.mode: environment variable ECHO_MODE is not set: export ECHO_MODE=… or use ${ECHO_MODE:-default}")
	require.NotContains(t, r.stderr, "HOOK_SECRET")
	r = run(cleanEnv(t, "ECHO_MODE=ok"), "plugin", "run", "echo", "--wait")
	require.Equal(t, 0, r.code, "the webhook's secret is not echo's: %s", r)

	// A daemon started where the secret is not set is refused, naming it
	// (the message is not redacted into "HOOK_SECRET=[redacted]").
	r = run(cleanEnv(t, "ECHO_MODE=ok"), "system", "start")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "secrets.hook: environment variable HOOK_SECRET is not set: export HOOK_SECRET=… or use ${HOOK_SECRET:-default}")

	d := start(t, both, w.args("system", "start")...)
	d.waitLine(t, 0, messageIs("ductile started"))

	// In the bare shell, beside the daemon.
	var ran runView
	r = run(bare, "plugin", "run", "echo", "--payload", `{"x":1}`, "--wait", "--json")
	require.Equal(t, 0, r.code, "%s", r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ran))
	require.Equal(t, "succeeded", ran.Status)
	require.Equal(t, "daemon", ran.RanBy)
	for _, args := range [][]string{
		{"pipeline", "list"}, {"plugin", "list"}, {"job", "list"}, {"config", "show"},
		{"system", "reload", "--dry-run"}, {"system", "reload"}, {"config", "lock", "--dry-run"},
	} {
		r = run(bare, args...)
		require.Equal(t, 0, r.code, "%q: %s", args, r)
	}
	r = run(bare, "system", "reload", "--dry-run")
	require.Contains(t, r.stdout, "0 setting(s) changed", "values this shell cannot resolve are not compared as changes")
	require.Contains(t, r.stderr, "sections.secrets: not compared: it depends on HOOK_SECRET, not set in this shell")

	// config check says what the daemon needs, as warnings.
	r = run(bare, "config", "check")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "config OK")
	for _, v := range []string{"plugins.echo.config.mode: environment variable ECHO_MODE", "secrets.hook: environment variable HOOK_SECRET"} {
		require.Contains(t, r.stdout, v+" is not set in this shell: the daemon needs it in its own environment (with systemd: EnvironmentFile=")
	}

	// plugin health would run echo here: not with a placeholder.
	r = run(bare, "plugin", "health", "echo")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stdout, "not_checked")
	require.Contains(t, r.stdout, "ECHO_MODE")
	w.stopDaemon(d)
}

// TestConfigCheckReportsEveryProblemInOneRun: after config token create, a
// hand edit with a typo to the config file (which holds webhooks, so a
// change to it refuses the config until locked) makes config check report
// the typo and the changed checksum together, whatever the kind of typo;
// and a reload
// prints the integrity warnings of the files it loaded on the CLI's
// output, not only in the daemon's log.
func TestConfigCheckReportsEveryProblemInOneRun(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
include: [routes.yaml]
plugin_roots: ["$PLUGINS"]
webhooks:
  listen: 127.0.0.1:0
  endpoints: [{path: /hook/echo, plugin: echo, secret_ref: hook}]
secrets:
  hook: ${HOOK_SECRET:-not-for-production}
`)
	extra := filepath.Join(filepath.Dir(w.config), "routes.yaml")
	require.NoError(t, os.WriteFile(extra, []byte("routes: [{from: echo, event_type: echo.handle, to: recorder}]\nplugins:\n  recorder: {config: {dir: "+w.scratch+"}}\n"), 0o600))
	r := w.run("config", "token", "create", "ci", "--scopes", "jobs:ro")
	require.Equal(t, 0, r.code, "%s", r)
	r = w.run("config", "check")
	require.Equal(t, 0, r.code, "%s", r)

	original, err := os.ReadFile(w.config)
	require.NoError(t, err)
	mismatch := "config.yaml: changed since ductile config lock"
	for _, edit := range []struct{ name, add, want string }{
		{"a route to a misspelt plugin", "routes: [{from: echo, event_type: echo.handle, to: ecko}]\n",
			`routes[0].to: no plugin named "ecko" was found, so every event this route matches would make a job that fails at once: did you mean echo?`},
		{"a misspelt key", "servise: {max_workers: 2}\n", "servise: unknown key: did you mean service?"},
	} {
		require.NoError(t, os.WriteFile(w.config, append(append([]byte{}, original...), edit.add...), 0o600))
		r = w.run("config", "check", "--json")
		require.Equal(t, 1, r.code, "%s: %s", edit.name, r)
		var out checkView
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), "%s", r)
		require.Len(t, out.Errors, 2, "%s: %v", edit.name, out.Errors)
		require.Contains(t, strings.Join(out.Errors, "\n"), edit.want, edit.name)
		require.Contains(t, strings.Join(out.Errors, "\n"), mismatch, edit.name)
	}
	require.NoError(t, os.WriteFile(w.config, original, 0o600))

	// A reload's integrity warnings reach the CLI: routes.yaml holds no
	// tokens, so a change to it warns (and applies).
	d := w.startDaemon()
	require.NoError(t, os.WriteFile(extra, []byte("routes: []\nplugins:\n  recorder: {config: {dir: "+w.scratch+"}}\n"), 0o600))
	for _, args := range [][]string{{"system", "reload", "--dry-run"}, {"system", "reload"}} {
		r = w.run(args...)
		require.Equal(t, 0, r.code, "%q: %s", args, r)
		require.Contains(t, r.stderr, "warning: routes.yaml: changed since ductile config lock", "%q", args)
	}
	var applied appliedView
	w.runJSON(0, &applied, "config", "show", "--applied", "--json")
	require.Equal(t, "reload", applied.Reason)
	require.Empty(t, applied.Settings.Routes)
	w.stopDaemon(d)
}

// checkView is what config check --json prints.
type checkView struct {
	OK       bool     `json:"ok"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
}
