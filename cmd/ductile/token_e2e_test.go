package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
)

// tokenCreatedView is what config token create --json prints.
type tokenCreatedView struct {
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	TokensFile string   `json:"tokens_file"`
	ScopesFile string   `json:"scopes_file"`
	Included   bool     `json:"included"`
	Checksums  bool     `json:"checksums_updated"`
	Key        string   `json:"key"`
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// guard builds the Registry a daemon would build from the config file now.
func guard(t *testing.T, path string) *auth.Registry {
	t.Helper()
	cfg, err := config.Load(path)
	require.NoError(t, err)
	return auth.New(cfg)
}

// TestTokenCreateListRevoke: on the real binary, token create writes the
// scopes file and a key_hash entry into a new tokens.yaml that it adds to
// the config's include: (keeping the config's comments), prints the key
// once on its last line, and the key then passes auth.New on the config a
// reload reads; list shows names and scopes, never keys; revoke removes it
// and the key stops working.
func TestTokenCreateListRevoke(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "# my settings\nservice:\n  max_workers: 2 # two workers\n")
	tokens := filepath.Join(filepath.Dir(w.config), "tokens.yaml")

	r := w.run("config", "token", "create", "ci", "--scopes", "jobs:ro,plugin:rw", "--dry-run")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "would create token ci in tokens.yaml")
	require.NoFileExists(t, tokens)

	r = w.run("config", "token", "create", "ci", "--scopes", "jobs:ro,plugin:rw")
	require.Equal(t, 0, r.code, "%s", r)
	key := lastLine(r.stdout)
	require.Regexp(t, `^dtk_[A-Za-z0-9_-]{43}$`, key)
	require.Contains(t, r.stdout, "ductile system reload")
	require.Equal(t, 1, strings.Count(r.stdout, key), "the key is printed once")

	body, err := os.ReadFile(w.config)
	require.NoError(t, err)
	require.Contains(t, string(body), "# my settings")
	require.Contains(t, string(body), "# two workers")
	require.Contains(t, string(body), "include:\n  - tokens.yaml")
	for _, f := range []string{w.config, tokens, filepath.Join(filepath.Dir(w.config), "scopes", "ci.json")} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(b), key, "%s holds the key", f)
	}

	g := guard(t, w.config)
	name, err := g.Check("Bearer "+key, auth.JobsRO)
	require.NoError(t, err)
	require.Equal(t, "ci", name)
	_, err = g.Check("Bearer "+key, auth.PluginRO) // write implies read
	require.NoError(t, err)
	_, err = g.Check("Bearer "+key, auth.JobsRW)
	require.ErrorIs(t, err, auth.ErrForbidden)

	// Refusals: the same name, an unknown scope, no scope.
	r = w.run("config", "token", "create", "ci", "--scopes", "jobs:ro")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, `a token named "ci" exists`)
	r = w.run("config", "token", "create", "bot", "--scopes", "job:ro")
	require.Equal(t, 2, r.code, "%s", r)
	require.Contains(t, r.stderr, `unknown scope "job:ro": did you mean jobs:ro?`)
	// …and which route needs which.
	require.Contains(t, r.stderr, "jobs:rw opens POST /job/{id}/cancel, POST /job/{id}/retry")
	require.Contains(t, r.stderr, "plugin:ro opens GET /pipelines, GET /pipelines/{name}, GET /plugin/{plugin}, POST /plugin/{plugin}/{command} (a command of type read), GET /plugins")

	// A second token goes into the same file, with --json.
	var created tokenCreatedView
	w.runJSON(0, &created, "config", "token", "create", "bot", "--scopes", "*", "--json")
	require.Equal(t, tokens, created.TokensFile)
	require.False(t, created.Included)
	require.Regexp(t, `^dtk_`, created.Key)

	var listed []struct {
		Name   string   `json:"name"`
		Scopes []string `json:"scopes"`
	}
	r = w.runJSON(0, &listed, "config", "token", "list", "--json")
	require.NotContains(t, r.stdout, key)
	require.Len(t, listed, 2)
	require.Equal(t, "ci", listed[0].Name)
	require.Equal(t, []string{"jobs:ro", "plugin:rw"}, listed[0].Scopes)
	require.Equal(t, "bot", listed[1].Name)

	r = w.run("config", "token", "revoke", "ci", "--dry-run")
	require.Equal(t, 0, r.code, "%s", r)
	_, err = guard(t, w.config).Check("Bearer "+key, auth.JobsRO)
	require.NoError(t, err, "a dry run revokes nothing")

	r = w.run("config", "token", "revoke", "ci")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "ductile system reload")
	require.NoFileExists(t, filepath.Join(filepath.Dir(w.config), "scopes", "ci.json"))
	_, err = guard(t, w.config).Check("Bearer "+key, auth.JobsRO)
	require.ErrorIs(t, err, auth.ErrUnauthorized)
	_, err = guard(t, w.config).Check("Bearer "+created.Key, auth.EventsRW)
	require.NoError(t, err)
	r = w.run("config", "token", "revoke", "ci")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, `no token named "ci"`)
}

// TestConfigLock: config lock records every file (scopes files too);
// token create keeps .checksums current; a changed ordinary file warns
// (config check, daemon start); a changed tokens file refuses a reload
// with the reason and then a start, until the change is locked.
func TestConfigLock(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "service:\n  max_workers: 2\n")
	dir := filepath.Dir(w.config)
	tokens := filepath.Join(dir, "tokens.yaml")
	r := w.run("config", "token", "create", "ci", "--scopes", "jobs:ro")
	require.Equal(t, 0, r.code, "%s", r)
	key := lastLine(r.stdout)

	r = w.run("config", "lock")
	require.Equal(t, 0, r.code, "%s", r)
	sums, err := os.ReadFile(filepath.Join(dir, ".checksums"))
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{64}  config.yaml\n[0-9a-f]{64}  tokens.yaml\n[0-9a-f]{64}  scopes/ci.json\n$`, string(sums))
	require.Contains(t, r.stdout, "tokens.yaml  a change refuses")
	require.Contains(t, r.stdout, "config.yaml  a change warns")

	// token create updates the checksums of what it writes.
	r = w.run("config", "token", "create", "bot", "--scopes", "jobs:rw")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "updated .checksums")
	r = w.run("config", "check")
	require.Equal(t, 0, r.code, "%s", r)
	require.NotContains(t, r.stdout, "checksums")

	// An ordinary file changed: a warning, and the daemon starts.
	appendFile(t, w.config, "# edited\n")
	r = w.run("config", "check")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "config.yaml: changed since ductile config lock")
	d := w.startDaemon()
	lines, _ := d.snapshot()
	require.Contains(t, strings.Join(lines, "\n"), "config file integrity warning")

	// The tokens file changed: the reload is refused with the reason.
	appendFile(t, tokens, "# edited\n")
	r = w.run("system", "reload")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "tokens.yaml: changed since ductile config lock")
	w.stopDaemon(d)

	// ... and so is a start, and config check says why.
	r = w.run("system", "start")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "tokens.yaml: changed since ductile config lock")
	r = w.run("config", "check")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stdout, "tokens.yaml: changed since ductile config lock")

	// Locked again, it loads, and the key still works.
	r = w.run("config", "lock", "--dry-run")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "tokens.yaml  a change refuses (changed)")
	require.Equal(t, 1, w.run("config", "check").code, "a dry run writes nothing")
	require.Equal(t, 0, w.run("config", "lock").code)
	_, err = guard(t, w.config).Check("Bearer "+key, auth.JobsRO)
	require.NoError(t, err)
	d = w.startDaemon()
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestTokenCreateLocksAnUnlockedConfig: the newcomer's flow. token create
// on a config with no .checksums writes one (every file, 0600, as config
// lock would) and says so, and the daemon starts. Without .checksums (an
// install from before it was required) start and config check refuse the
// config and name the fix; token revoke still works and locks it. A tokens
// file others may write refuses a start; one they may read only warns.
func TestTokenCreateLocksAnUnlockedConfig(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "service:\n  max_workers: 2\n")
	dir := filepath.Dir(w.config)
	sums, tokens := filepath.Join(dir, ".checksums"), filepath.Join(dir, "tokens.yaml")

	r := w.run("config", "token", "create", "ci", "--scopes", "jobs:ro", "--dry-run")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "would write .checksums (there is none)")
	require.NoFileExists(t, sums)

	var created struct {
		Locked bool   `json:"checksums_written"`
		Key    string `json:"key"`
	}
	w.runJSON(0, &created, "config", "token", "create", "ci", "--scopes", "jobs:ro", "--json")
	require.True(t, created.Locked)
	for _, f := range []string{sums, tokens, filepath.Join(dir, "scopes", "ci.json"), w.config} {
		info, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), f)
	}
	body, err := os.ReadFile(sums)
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{64}  config.yaml\n[0-9a-f]{64}  tokens.yaml\n[0-9a-f]{64}  scopes/ci.json\n$`, string(body))
	_, err = guard(t, w.config).Check("Bearer "+created.Key, auth.JobsRO)
	require.NoError(t, err)
	d := w.startDaemon()
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))

	// An install with tokens but no .checksums: refused, with the fix.
	require.NoError(t, os.Remove(sums))
	for _, args := range [][]string{{"system", "start"}, {"config", "check"}} {
		r = w.run(args...)
		require.Equal(t, 1, r.code, "%s", r)
		require.Contains(t, r.stdout+r.stderr, "tokens.yaml: holds tokens, secrets, scopes or webhooks, and there is no .checksums to check it against: record the files' hashes with ductile config lock --config "+w.config)
	}
	r = w.run("config", "token", "create", "bot", "--scopes", "jobs:rw")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "wrote .checksums (there was none)")
	require.NoError(t, os.Remove(sums))
	r = w.run("config", "token", "revoke", "bot")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "wrote .checksums (there was none)")
	require.Equal(t, 0, w.run("config", "check").code)

	// Others may write the tokens file: refused. Read it: a warning.
	require.NoError(t, os.Chmod(tokens, 0o666))
	r = w.run("system", "start")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "tokens.yaml: may be written by its group and others (mode 0666)")
	require.Contains(t, r.stderr, "chmod 600 "+tokens)
	require.NoError(t, os.Chmod(tokens, 0o644))
	r = w.run("config", "check")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "tokens.yaml: may be read by its group and others (mode 0644)")
	d = w.startDaemon()
	lines, _ := d.snapshot()
	require.Contains(t, strings.Join(lines, "\n"), "config file integrity warning")
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
}
