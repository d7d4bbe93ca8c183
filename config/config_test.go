package config_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture returns the absolute path of testdata/<parts...>.
func fixture(t *testing.T, parts ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(append([]string{"testdata"}, parts...)...))
	require.NoError(t, err)
	return p
}

// unsetenv unsets key for the duration of the test (t.Setenv restores it).
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "")
	require.NoError(t, os.Unsetenv(key))
}

func defaultTimeouts() config.Timeouts {
	return config.Timeouts{Poll: 60 * time.Second, Handle: 120 * time.Second, Health: 10 * time.Second, Init: 30 * time.Second}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	want := &config.Config{
		PluginRoots: []string{},
		Service: config.Service{
			MaxWorkers:      max(1, runtime.NumCPU()-1),
			DedupeTTL:       24 * time.Hour,
			JobLogRetention: 30 * 24 * time.Hour,
		},
		Plugins: map[string]config.PluginConfig{},
		Routes:  []config.Route{},
	}
	require.Equal(t, want, config.Default())

	require.Equal(t, config.PluginConfig{
		Enabled:  true,
		Retry:    config.Retry{MaxAttempts: 4, BackoffBase: 30 * time.Second},
		Timeouts: defaultTimeouts(),
		Config:   map[string]any{},
	}, config.Default().Plugin("anything"))
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	c, err := config.Load(fixture(t, "full", "config.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		plugin, command string
		want            time.Duration
	}{
		{"echo", "poll", 5 * time.Minute},
		{"echo", "handle", 2 * time.Minute},
		{"echo", "health", 5 * time.Second},
		{"echo", "init", time.Minute},
		{"echo", "sync", 2 * time.Minute}, // other commands use handle's
		{"bare", "poll", 60 * time.Second},
		{"unconfigured", "poll", 60 * time.Second},
		{"unconfigured", "handle", 120 * time.Second},
		{"unconfigured", "health", 10 * time.Second},
		{"unconfigured", "init", 30 * time.Second},
		{"unconfigured", "oauth_callback", 120 * time.Second},
	} {
		require.Equal(t, tc.want, c.Timeout(tc.plugin, tc.command), "%s %s", tc.plugin, tc.command)
	}
}

// TestUnconfiguredPluginDoesNotAllocate: the dispatcher asks Plugin and
// Timeout per candidate job, most often for plugins the config leaves out.
// Not parallel: AllocsPerRun counts the whole process's allocations.
func TestUnconfiguredPluginDoesNotAllocate(t *testing.T) {
	c := config.Default()
	var pc config.PluginConfig
	var timeout time.Duration
	allocs := testing.AllocsPerRun(100, func() {
		pc = c.Plugin("unconfigured")
		timeout = c.Timeout("unconfigured", "poll")
	})
	require.Zero(t, allocs)
	require.Equal(t, config.DefaultPlugin(), pc)
	require.Equal(t, config.DefaultPollTimeout, timeout)
}

// TestLoad covers configs that load; env-dependent cases set variables, so
// the table is not parallel.
func TestLoad(t *testing.T) {
	home, err := os.UserHomeDir()
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		env   map[string]string // set for the case
		unset []string          // unset for the case
		check func(t *testing.T, c *config.Config)
	}{
		{
			name: "defaults",
			check: func(t *testing.T, c *config.Config) {
				src := fixture(t, "defaults", "config.yaml")
				require.Equal(t, src, c.Source)
				require.Equal(t, filepath.Dir(src), c.Dir)
				require.Equal(t, []string{src}, c.Files)
				d := config.Default()
				require.Equal(t, d.Service, c.Service)
				require.Empty(t, c.StateDir)
				require.Equal(t, []string{}, c.PluginRoots)
				require.Equal(t, map[string]config.PluginConfig{}, c.Plugins)
				require.Equal(t, []config.Route{}, c.Routes)
				require.Nil(t, c.Pipelines)
				require.Nil(t, c.API)
				require.Nil(t, c.Webhooks)
			},
		},
		{
			name: "full",
			check: func(t *testing.T, c *config.Config) {
				dir := fixture(t, "full")
				require.Equal(t, filepath.Join(dir, "state"), c.StateDir)
				require.Equal(t, []string{
					filepath.Join(dir, "plugins"),
					filepath.Join(home, "ductile-plugins"),
					"/opt/ductile/plugins",
				}, c.PluginRoots)
				require.Equal(t, config.Service{
					MaxWorkers:      3,
					DedupeTTL:       12 * time.Hour,
					JobLogRetention: 36 * time.Hour, // 1d12h
					AllowSymlinks:   true,
				}, c.Service)

				echo := c.Plugin("echo")
				require.NotNil(t, echo.Schedules)
				require.Equal(t, "config.yaml:26", c.Position(echo.Schedules))
				echo.Schedules = nil
				require.Equal(t, config.PluginConfig{
					Enabled:     false,
					Parallelism: 2,
					Retry:       config.Retry{MaxAttempts: 5, BackoffBase: 90 * time.Second},
					Timeouts:    config.Timeouts{Poll: 5 * time.Minute, Handle: 2 * time.Minute, Health: 5 * time.Second, Init: time.Minute},
					Config: map[string]any{
						"mode": "ok", "count": 3, "ratio": 0.5, "flag": true,
						"when": "2024-01-01", "items": []any{"a", 1}, "nothing": nil,
					},
				}, echo)
				// An empty entry is a configured plugin with every default.
				require.Contains(t, c.Plugins, "bare")
				require.Equal(t, config.DefaultPlugin(), c.Plugins["bare"])

				require.Equal(t, []config.Route{
					{From: "echo", EventType: "echo.done", To: "other", Command: "handle"},
					{From: "other", EventType: "other.done", To: "echo", Command: "sync"},
				}, c.Routes)
				require.Equal(t, yaml.SequenceNode, c.Pipelines.Kind)
				require.Equal(t, "config.yaml:35", c.Position(c.Pipelines.Content[0]))
				require.Equal(t, "config.yaml:38", c.Position(c.API.Content[1]))
				require.Equal(t, "127.0.0.1:8081", c.Webhooks.Content[1].Value)
			},
		},
		{
			name: "include",
			check: func(t *testing.T, c *config.Config) {
				dir := fixture(t, "include")
				// The including file first, then its includes in order, depth first;
				// a directory gives its *.yaml/*.yml files in lexical order, without
				// dotfiles, other extensions or subdirectories.
				require.Equal(t, []string{
					filepath.Join(dir, "config.yaml"),
					filepath.Join(dir, "base.yaml"),
					filepath.Join(dir, "nested", "deeper.yaml"),
					filepath.Join(dir, "conf.d", "10-first.yaml"),
					filepath.Join(dir, "conf.d", "20-second.yml"),
				}, c.Files)
				// Later files win: 2 (config.yaml) → 5 (base.yaml) → 7 (20-second.yml).
				require.Equal(t, 7, c.Service.MaxWorkers)
				// Set in config.yaml only; the empty value in 20-second.yml adds nothing.
				require.Equal(t, time.Hour, c.Service.DedupeTTL)
				require.Equal(t, 30*24*time.Hour, c.Service.JobLogRetention)
				// Set in nested/deeper.yaml, resolved against the config file's directory.
				require.Equal(t, filepath.Join(dir, "state"), c.StateDir)

				// Deep merge across four files; lists other than routes and
				// pipelines are replaced, not concatenated.
				require.Equal(t, config.PluginConfig{
					Enabled:     true,
					Parallelism: 1,
					Retry:       config.Retry{MaxAttempts: 2, BackoffBase: time.Minute},
					Timeouts:    defaultTimeouts(),
					Config: map[string]any{
						"mode":   "second",
						"nested": map[string]any{"a": 1, "b": 20, "c": 30},
						"list":   []any{3},
					},
				}, c.Plugin("echo"))

				// Routes concatenate in load order.
				require.Equal(t, []config.Route{
					{From: "main", EventType: "main.event", To: "sink", Command: "handle"},
					{From: "base", EventType: "base.event", To: "sink", Command: "handle"},
					{From: "deeper", EventType: "deeper.event", To: "sink", Command: "handle"},
					{From: "first", EventType: "first.event", To: "sink", Command: "sync"},
					{From: "second", EventType: "second.event", To: "sink", Command: "handle"},
				}, c.Routes)
				// So do pipelines, and each item still knows its file.
				require.Len(t, c.Pipelines.Content, 2)
				require.Equal(t, "base.yaml:14", c.Position(c.Pipelines.Content[0]))
				require.Equal(t, "conf.d/10-first.yaml:10", c.Position(c.Pipelines.Content[1]))
			},
		},
		{
			name: "interp",
			env: map[string]string{
				"DUCTILE_TEST_WORKERS": "3",
				"DUCTILE_TEST_TOKEN":   "s3cr3t",
				"DUCTILE_TEST_NAME":    "", // set but empty: :- uses the default
				"DUCTILE_TEST_EMPTY":   "", // set but empty: ${VAR} gives ""
				"DUCTILE_TEST_EVIL":    "x\nplugins: {evil: {}}",
				"DUCTILE_TEST_ZIP":     "007",
			},
			unset: []string{"DUCTILE_TEST_STATE", "DUCTILE_TEST_SYMLINKS", "DUCTILE_TEST_FROM"},
			check: func(t *testing.T, c *config.Config) {
				require.Equal(t, "/tmp/ductile-state", c.StateDir)
				require.Equal(t, 3, c.Service.MaxWorkers) // a string from the env, parsed for an int field
				require.True(t, c.Service.AllowSymlinks)  // default "true", parsed for a bool field
				require.Equal(t, map[string]any{
					"token":    "s3cr3t",
					"greeting": "hello world!",
					"empty":    "[]",
					"literal":  "${NOT_A_VAR} costs $5",
					"evil":     "x\nplugins: {evil: {}}", // stays one string
					"zip":      "007",                    // env values stay strings
					"block":    "line one world\n",
					"plain":    "no placeholders here",
				}, c.Plugin("echo").Config)
				// The injected text did not become a plugin.
				require.Equal(t, []string{"echo"}, keys(c.Plugins))
				require.Equal(t, "echo", c.Routes[0].From)
			},
		},
		{
			name:  "anchors",
			unset: []string{"DUCTILE_TEST_UNSET"}, // used only under an x- key
			check: func(t *testing.T, c *config.Config) {
				require.Equal(t, config.Retry{MaxAttempts: 6, BackoffBase: 5 * time.Second}, c.Plugin("a").Retry)
				require.Equal(t, config.Retry{MaxAttempts: 2, BackoffBase: 5 * time.Second}, c.Plugin("b").Retry)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, k := range tc.unset {
				unsetenv(t, k)
			}
			c, err := config.Load(fixture(t, tc.name, "config.yaml"))
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestLoadErrors asserts the exact report for broken configs: every line
// names file:line, the key path and the fix, all problems together.
func TestLoadErrors(t *testing.T) {
	unsetenv(t, "DUCTILE_TEST_UNSET")
	unsetenv(t, "DUCTILE_TEST_UNSET_HOST")
	missingDir := fixture(t, "missing")

	for _, tc := range []struct {
		name string
		file string // default config.yaml
		want []string
	}{
		{
			name: "cycle2",
			file: "a.yaml",
			want: []string{"b.yaml:1: include[0]: include cycle a.yaml → b.yaml → a.yaml: remove one of these includes"},
		},
		{
			name: "cycle3",
			file: "a.yaml",
			want: []string{"c.yaml:3: include[0]: include cycle a.yaml → b.yaml → c.yaml → a.yaml: remove one of these includes"},
		},
		{
			name: "missing",
			want: []string{
				"config.yaml:5: include[1]: nope.yaml not found (looked for " + filepath.Join(missingDir, "nope.yaml") +
					"): fix the path (relative to the directory of config.yaml) or remove the entry",
				"conf.d/present.yaml:1: include[0]: ../also-missing/ not found (looked for " + filepath.Join(missingDir, "also-missing") +
					"): fix the path (relative to the directory of conf.d/present.yaml) or remove the entry",
			},
		},
		{
			name: "dup-include",
			want: []string{"conf.d/x.yaml:1: include[0]: common.yaml is already included (by config.yaml:2): include each file once"},
		},
		{
			name: "unset-var",
			want: []string{
				"config.yaml:4: plugins.echo.config.token: environment variable DUCTILE_TEST_UNSET is not set: export DUCTILE_TEST_UNSET=… or use ${DUCTILE_TEST_UNSET:-default}",
				"config.yaml:5: plugins.echo.config.url: environment variable DUCTILE_TEST_UNSET_HOST is not set: export DUCTILE_TEST_UNSET_HOST=… or use ${DUCTILE_TEST_UNSET_HOST:-default}",
				"config.yaml:5: plugins.echo.config.url: environment variable DUCTILE_TEST_UNSET is not set: export DUCTILE_TEST_UNSET=… or use ${DUCTILE_TEST_UNSET:-default}",
				`config.yaml:6: plugins.echo.config.bad: invalid placeholder "${1BAD}": write ${NAME} or ${NAME:-default}, NAME being letters, digits and _ not starting with a digit ("$${" for a literal "${")`,
				`config.yaml:7: plugins.echo.config.open: unterminated "${": close it with "}", or write "$${" for a literal "${"`,
			},
		},
		{
			name: "typo",
			want: []string{
				"config.yaml:1: servce: unknown key: did you mean service? (valid keys: api, pipelines, plugin_roots, plugins, routes, service, state_dir, webhooks)",
				"config.yaml:4: service.max_worker: unknown key: did you mean max_workers? (valid keys: allow_symlinks, dedupe_ttl, job_log_retention, max_workers)",
				"config.yaml:7: plugins.echo.retyr: unknown key: did you mean retry? (valid keys: config, enabled, parallelism, retry, schedules, timeouts); settings for the plugin itself go under config:",
				"config.yaml:8: plugins.echo.mode: unknown key (valid keys: config, enabled, parallelism, retry, schedules, timeouts); settings for the plugin itself go under config:",
				"config.yaml:9: plugins.echo.timeouts.sync: unknown key (valid keys: handle, health, init, poll); commands other than poll, health and init use handle's timeout",
			},
		},
		{
			name: "multi",
			want: []string{
				"config.yaml:3: service.max_workers: must be ≥ 1, got -1 (1 runs one job at a time; leave it out for the default)",
				`config.yaml:4: service.dedupe_ttl: invalid duration "1 day": use a Go duration like 90s, 15m or 2h30m, or days like 7d`,
				"config.yaml:7: plugins.echo.parallelism: must be ≥ 0, got -2 (0 means no cap beyond service.max_workers)",
				`config.yaml:8: plugins.echo.enabled: must be true or false, got "yes"`,
				"config.yaml:10: plugins.echo.retry.max_attempts: must be ≥ 1, got 0 (it counts the first attempt; 1 means no retries)",
				"config.yaml:11: plugins.echo.retry.backoff_base: must be a duration with a unit, like 30s, got 30",
				"config.yaml:13: routes[0].event_type: missing: give the event type to match exactly, e.g. echo.done",
				"config.yaml:14: routes[0].to: must not be empty: name the plugin that receives the event",
				"config.yaml:15: routes[1].from: missing: name the plugin that emits the event",
				"config.yaml:15: routes[1].to: missing: name the plugin that receives the event",
				"config.yaml:16: routes[2]: must be a mapping with keys from, event_type, to, command",
				"extra.yaml:4: plugins.other.config.token: environment variable DUCTILE_TEST_UNSET is not set: export DUCTILE_TEST_UNSET=… or use ${DUCTILE_TEST_UNSET:-default}",
				`extra.yaml:6: plugins.other.timeouts.handle: invalid duration "soon": use a Go duration like 90s, 15m or 2h30m, or days like 7d`,
				"extra.yaml:7: plugins.other.timeouts.poll: must be greater than 0, got 0s",
			},
		},
		{
			name: "bad-duration",
			want: []string{
				`config.yaml:2: service.dedupe_ttl: invalid duration "24 hours": use a Go duration like 90s, 15m or 2h30m, or days like 7d`,
				"config.yaml:3: service.job_log_retention: must be a duration with a unit, like 60s, got 60",
				"config.yaml:7: plugins.echo.timeouts.poll: must be greater than 0, got -5s",
			},
		},
		{
			name: "negative-workers",
			want: []string{"config.yaml:2: service.max_workers: must be ≥ 1, got -3 (1 runs one job at a time; leave it out for the default)"},
		},
		{
			name: "duplicate-key",
			want: []string{"config.yaml:3: service.max_workers: key defined twice in the same mapping (first at line 2): remove one"},
		},
		{
			name: "multi-doc",
			want: []string{"config.yaml:3: a second YAML document (---) is not supported: keep one document per file and split with include:"},
		},
		{
			name: "syntax",
			want: []string{"config.yaml:1: invalid YAML: did not find expected ',' or ']'"},
		},
		{
			name: "not-mapping",
			want: []string{"config.yaml:1: the top level must be a mapping of keys (service:, plugins:, routes:, …)"},
		},
		{
			name: "alias-loop",
			want: []string{"config.yaml:2: x-a.k[0]: alias *a is inside the value it refers to: remove the alias"},
		},
		{
			name: "alias-bomb",
			want: []string{"config.yaml:5: x-l4[7]: aliases expand to more than 100000 values: write the values out"},
		},
		{
			name: "bad-include",
			want: []string{
				"config.yaml:1: include: must be a list of files or directories, e.g. include: [more.yaml, conf.d/]",
				"config.yaml:2: plugin_roots: must be a list of directories, e.g. plugin_roots: [./plugins]",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = "config.yaml"
			}
			c, err := config.Load(fixture(t, tc.name, file))
			require.Nil(t, c)
			var ve *config.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.want, strings.Split(err.Error(), "\n"))
			require.Len(t, ve.Errors, len(tc.want))
		})
	}
}

func TestFieldError(t *testing.T) {
	t.Parallel()
	_, err := config.Load(fixture(t, "typo", "config.yaml"))
	var ve *config.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, config.FieldError{
		File: "config.yaml",
		Line: 4,
		Path: "service.max_worker",
		Msg:  "unknown key: did you mean max_workers? (valid keys: allow_symlinks, dedupe_ttl, job_log_retention, max_workers)",
	}, ve.Errors[1])
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := config.Load(filepath.Join(t.TempDir(), "config.yaml"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	var ve *config.ValidationError
	require.False(t, errors.As(err, &ve))
}

func TestRedacted(t *testing.T) {
	t.Setenv("DUCTILE_TEST_REDACT", "from-env")
	c, err := config.Load(fixture(t, "redact", "config.yaml"))
	require.NoError(t, err)
	r := c.Redacted()

	require.Equal(t, map[string]any{
		"mode":        "ok",
		"api_key":     "[redacted]",
		"Auth":        "[redacted]", // the whole mapping under a matching key
		"nested":      map[string]any{"password": "[redacted]", "url": "https://example.com"},
		"from_env":    "[redacted]", // came from ${VAR}
		"list":        []any{"a", "[redacted]"},
		"empty_token": nil, // nothing to hide
	}, r.Plugin("echo").Config)

	out, err := json.Marshal(r)
	require.NoError(t, err)
	for _, secret := range []string{"abc123", "hunter2", "from-env", "shh", "sched-secret", `"pass"`} {
		require.NotContains(t, string(out), secret)
	}
	require.Contains(t, string(out), `"webhooks":{"endpoints":[{"path":"/hook","secret":"[redacted]"}],"listen":"127.0.0.1:8081"}`)
	require.Contains(t, string(out), `"schedules":[{"every":"5m","token":"[redacted]"}]`)

	// The original is untouched, and redacting twice changes nothing more.
	require.Equal(t, "abc123", c.Plugin("echo").Config["api_key"])
	require.Equal(t, "from-env", c.Plugin("echo").Config["from_env"])
	again, err := json.Marshal(r.Redacted())
	require.NoError(t, err)
	require.JSONEq(t, string(out), string(again))
}

func TestMarshal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
plugin_roots: [plugins]
service: {max_workers: 2, job_log_retention: 30d}
plugins: {echo: {retry: {backoff_base: 90s}, config: {b: 1, a: x}}}
routes: [{from: echo, event_type: e, to: sink}]
api: {listen: ":8080"}
`), 0o600))
	c, err := config.Load(path)
	require.NoError(t, err)

	js, err := json.Marshal(c)
	require.NoError(t, err)
	require.Equal(t, `{"plugin_roots":[`+mustJSON(t, filepath.Join(dir, "plugins"))+`],`+
		`"service":{"max_workers":2,"dedupe_ttl":"24h","job_log_retention":"720h","allow_symlinks":false},`+
		`"plugins":{"echo":{"enabled":true,"parallelism":0,"retry":{"max_attempts":4,"backoff_base":"1m30s"},`+
		`"timeouts":{"poll":"1m","handle":"2m","health":"10s","init":"30s"},"config":{"a":"x","b":1}}},`+
		`"routes":[{"from":"echo","event_type":"e","to":"sink","command":"handle"}],`+
		`"api":{"listen":":8080"}}`, string(js))

	y, err := yaml.Marshal(c)
	require.NoError(t, err)
	require.Equal(t, `plugin_roots:
    - `+filepath.Join(dir, "plugins")+`
service:
    max_workers: 2
    dedupe_ttl: 24h
    job_log_retention: 720h
    allow_symlinks: false
plugins:
    echo:
        enabled: true
        parallelism: 0
        retry:
            max_attempts: 4
            backoff_base: 1m30s
        timeouts:
            poll: 1m
            handle: 2m
            health: 10s
            init: 30s
        config:
            a: x
            b: 1
routes:
    - from: echo
      event_type: e
      to: sink
      command: handle
api:
    listen: :8080
`, string(y))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestMarshalRoundTrip: what config show prints loads back as the same config.
func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"defaults", "full", "include", "anchors"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(fixture(t, name, "config.yaml"))
			require.NoError(t, err)
			y, err := yaml.Marshal(c)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(path, y, 0o600))
			back, err := config.Load(path)
			require.NoError(t, err, string(y))
			require.JSONEq(t, mustJSON(t, c), mustJSON(t, back))
		})
	}
}
