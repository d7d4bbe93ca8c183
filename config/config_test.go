package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
)

// TestMain gives the tests a home directory of their own: fixtures expand
// ~/ paths, and the caller's $HOME may be unset or anything.
func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "ductile-config-home-")
	if err == nil {
		err = os.Setenv("HOME", home)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(home)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
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
			MaxWorkers:      max(4, runtime.NumCPU()-1),
			DedupeTTL:       24 * time.Hour,
			JobLogRetention: 30 * 24 * time.Hour,
			MaxRouteDepth:   20,
			MaxHookDepth:    3,
			LeasePeriod:     30 * time.Second,
		},
		Plugins:         map[string]config.PluginConfig{},
		Routes:          []config.Route{},
		WebhookSettings: config.WebhookSettings{Listen: "127.0.0.1:8081"},
		APIServer:       config.DefaultAPIServer(),
	}
	require.Equal(t, want, config.Default())

	require.Equal(t, config.PluginConfig{
		Enabled:             true,
		Retry:               config.Retry{MaxAttempts: 4, BackoffBase: 30 * time.Second},
		Timeouts:            defaultTimeouts(),
		MaxOutstandingPolls: 1,
		CircuitBreaker:      config.DefaultCircuitBreaker(),
		Config:              map[string]any{},
	}, config.Default().Plugin("anything"))
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	c, err := config.Load(loadable(t, "full"))
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
				dir := c.Dir // a locked copy of testdata/full (loadable)
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
					MaxRouteDepth:   20,
					MaxHookDepth:    3,
					LeasePeriod:     30 * time.Second, // default
				}, c.Service)

				echo := c.Plugin("echo")
				require.Len(t, echo.Schedules, 1)
				require.Equal(t, "every 5m", echo.Schedules[0].When())
				echo.Schedules = nil
				require.Equal(t, config.PluginConfig{
					Enabled:             false,
					Parallelism:         2,
					MaxOutstandingPolls: 1,
					CircuitBreaker:      config.DefaultCircuitBreaker(),
					Retry:               config.Retry{MaxAttempts: 5, BackoffBase: 90 * time.Second},
					Timeouts:            config.Timeouts{Poll: 5 * time.Minute, Handle: 2 * time.Minute, Health: 5 * time.Second, Init: time.Minute},
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
					Enabled:             true,
					Parallelism:         1,
					MaxOutstandingPolls: 1,
					CircuitBreaker:      config.DefaultCircuitBreaker(),
					Retry:               config.Retry{MaxAttempts: 2, BackoffBase: time.Minute},
					Timeouts:            defaultTimeouts(),
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
			c, err := config.Load(loadable(t, tc.name))
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
				"config.yaml:4: plugins.echo.config.token: environment variable DUCTILE_TEST_UNSET is not set: export DUCTILE_TEST_UNSET=… or use ${DUCTILE_TEST_UNSET:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
				"config.yaml:5: plugins.echo.config.url: environment variable DUCTILE_TEST_UNSET_HOST is not set: export DUCTILE_TEST_UNSET_HOST=… or use ${DUCTILE_TEST_UNSET_HOST:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
				"config.yaml:5: plugins.echo.config.url: environment variable DUCTILE_TEST_UNSET is not set: export DUCTILE_TEST_UNSET=… or use ${DUCTILE_TEST_UNSET:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
				`config.yaml:6: plugins.echo.config.bad: invalid placeholder "${1BAD}": write ${NAME} or ${NAME:-default}, NAME being letters, digits and _ not starting with a digit ("$${" for a literal "${")`,
				`config.yaml:7: plugins.echo.config.open: unterminated "${": close it with "}", or write "$${" for a literal "${"`,
			},
		},
		{
			name: "typo",
			want: []string{
				"config.yaml:1: servce: unknown key: did you mean service? (valid keys: api, include, pipelines, plugin_roots, plugins, routes, secrets, service, state_dir, tokens, topics, webhooks)",
				"config.yaml:4: service.max_worker: unknown key: did you mean max_workers? (valid keys: allow_symlinks, dedupe_ttl, job_log_retention, lease_period, max_hook_depth, max_route_depth, max_workers)",
				"config.yaml:7: plugins.echo.retyr: unknown key: did you mean retry? (valid keys: circuit_breaker, config, enabled, max_outstanding_polls, notify_on_complete, parallelism, retry, runs_on, schedules, timeouts); settings for the plugin itself go under config:",
				"config.yaml:8: plugins.echo.mode: unknown key (valid keys: circuit_breaker, config, enabled, max_outstanding_polls, notify_on_complete, parallelism, retry, runs_on, schedules, timeouts); settings for the plugin itself go under config:",
				"config.yaml:9: plugins.echo.timeouts.sync: unknown key (valid keys: handle, health, init, poll); commands other than poll, health and init use handle's timeout",
				"config.yaml:11: plugins.other.retries: unknown key: did you mean retry? (valid keys: circuit_breaker, config, enabled, max_outstanding_polls, notify_on_complete, parallelism, retry, runs_on, schedules, timeouts); settings for the plugin itself go under config:",
				"config.yaml:12: plugins.other.retry.backoff: unknown key: did you mean backoff_base? (valid keys: backoff_base, max_attempts)",
				"config.yaml:12: plugins.other.retry.Max-Attempts: unknown key: did you mean max_attempts? (valid keys: backoff_base, max_attempts)",
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
				"extra.yaml:4: plugins.other.config.token: environment variable DUCTILE_TEST_UNSET is not set: export DUCTILE_TEST_UNSET=… or use ${DUCTILE_TEST_UNSET:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
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
				`config.yaml:8: plugins.echo.timeouts.handle: invalid duration "https://[redacted]@host": use a Go duration like 90s, 15m or 2h30m, or days like 7d`,
			},
		},
		{
			name: "negative-workers",
			want: []string{"config.yaml:2: service.max_workers: must be ≥ 1, got -3 (1 runs one job at a time; leave it out for the default)"},
		},
		{
			name: "zero-route-depth",
			want: []string{"config.yaml:2: service.max_route_depth: must be ≥ 1, got 0 (the deepest a routed job may be; a job enqueued by a producer is depth 0)"},
		},
		{
			name: "lease-period-range",
			want: []string{"config.yaml:2: service.lease_period: must be between 1s and 1h, got 500ms (how long a remote worker's claim holds a job; workers renew every third of it)"},
		},
		{
			name: "lease-period-range",
			file: "long.yaml",
			want: []string{"long.yaml:2: service.lease_period: must be between 1s and 1h, got 2h (how long a remote worker's claim holds a job; workers renew every third of it)"},
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
		Msg:  "unknown key: did you mean max_workers? (valid keys: allow_symlinks, dedupe_ttl, job_log_retention, lease_period, max_hook_depth, max_route_depth, max_workers)",
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
	c, err := config.Load(loadable(t, "redact"))
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

		// The userinfo of a URL (user too: a token is often the user), a
		// user:password@host without a scheme, and the value of a
		// secret-named parameter are hidden; the rest stays readable.
		"dsn":          "postgres://[redacted]@db/app",
		"site":         "https://[redacted]@host.example/path?x=1#top",
		"user_only":    "https://[redacted]@github.com/o/r.git",
		"at_inside":    "postgres://[redacted]@db/app",
		"slash_inside": "postgres://[redacted]@db/app",
		"proxy":        "[redacted]@proxy.local:3128",
		"libpq":        "host=db user=app password=[redacted] dbname=app",
		"query":        "https://api.example.com/v1?api_key=[redacted]&mode=fast",
		"sentence":     "connect with mysql://[redacted]@h3:3306/x then stop",
		"urls":         []any{"https://[redacted]@h1", map[string]any{"deeper": "mysql://[redacted]@h2:3306/x"}},
		"email":        "ops@example.com",
		"at_in_path":   "https://example.com/users/@me",
		"ipv6":         "http://[::1]:8080/x",
		"scp":          "git@github.com:o/r.git",
	}, r.Plugin("echo").Config)

	out, err := json.Marshal(r)
	require.NoError(t, err)
	for _, secret := range []string{"abc123", "hunter2", "from-env", "shh", "sched-secret", `"pass"`,
		"s3cret", "pa55word", "ghp0tokenuser", "p@ss", "ss@", "pa/ss", "pr0xypass", "l1bpq", "q5ecret",
		"sentpw", "listpw", "deeppw", "fwdpass", "r3dispw", "schedpw"} {
		require.NotContains(t, string(out), secret)
	}
	require.Contains(t, string(out), `"webhooks":{"endpoints":[{"path":"/hook","plugin":"echo","secret_ref":"[redacted]"}],"listen":"127.0.0.1:8081"}`)
	require.Contains(t, string(out), `"pipelines":[{"forward":"https://[redacted]@relay.example/in","name":"p","upstream":"redis://[redacted]@cache:6379/0"}]`)
	require.Contains(t, string(out), `"schedules":[{"id":"default","command":"poll","payload":{"mode":"fast","token":"[redacted]","url":"https://[redacted]@sched.example/x"},"every":"5m","jitter":"0s","timezone":"Local","catch_up":"skip","if_running":"skip"}]`)

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
service: {max_workers: 2, job_log_retention: 30d, max_route_depth: 5}
plugins: {echo: {retry: {backoff_base: 90s}, config: {b: 1, a: x}}}
routes: [{from: echo, event_type: e, to: sink}]
api: {listen: ":8080", insecure_plaintext: true}
`), 0o600))
	c, err := config.Load(path)
	require.NoError(t, err)

	js, err := json.Marshal(c)
	require.NoError(t, err)
	require.Equal(t, `{"plugin_roots":[`+mustJSON(t, filepath.Join(dir, "plugins"))+`],`+
		`"service":{"max_workers":2,"dedupe_ttl":"24h","job_log_retention":"720h","allow_symlinks":false,"max_route_depth":5,"max_hook_depth":3,"lease_period":"30s"},`+
		`"plugins":{"echo":{"enabled":true,"parallelism":0,"max_outstanding_polls":1,"retry":{"max_attempts":4,"backoff_base":"1m30s"},`+
		`"timeouts":{"poll":"1m","handle":"2m","health":"10s","init":"30s"},"circuit_breaker":{"enabled":true,"threshold":3,"reset_after":"30m"},"notify_on_complete":false,"config":{"a":"x","b":1}}},`+
		`"routes":[{"from":"echo","event_type":"e","to":"sink","command":"handle"}],`+
		`"api":{"insecure_plaintext":true,"listen":":8080"}}`, string(js))

	y, err := yaml.Marshal(c)
	require.NoError(t, err)
	require.Equal(t, `plugin_roots:
    - `+filepath.Join(dir, "plugins")+`
service:
    max_workers: 2
    dedupe_ttl: 24h
    job_log_retention: 720h
    allow_symlinks: false
    max_route_depth: 5
    max_hook_depth: 3
    lease_period: 30s
plugins:
    echo:
        enabled: true
        parallelism: 0
        max_outstanding_polls: 1
        retry:
            max_attempts: 4
            backoff_base: 1m30s
        timeouts:
            poll: 1m
            handle: 2m
            health: 10s
            init: 30s
        circuit_breaker:
            enabled: true
            threshold: 3
            reset_after: 30m
        notify_on_complete: false
        config:
            a: x
            b: 1
routes:
    - from: echo
      event_type: e
      to: sink
      command: handle
api:
    insecure_plaintext: true
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
	for _, name := range []string{"defaults", "full", "include", "anchors", "schedules"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(loadable(t, name))
			require.NoError(t, err)
			y, err := yaml.Marshal(c)
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(path, y, 0o600))
			back, err := lockAndLoad(t, path)
			require.NoError(t, err, string(y))
			require.JSONEq(t, mustJSON(t, c), mustJSON(t, back))
		})
	}
}

// TestRedactString: credentials inside strings are hidden wherever they sit,
// and what is not a credential stays as written.
func TestRedactString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://app:s3cret@db/app", "postgres://[redacted]@db/app"},
		{"https://user:pa55word@host", "https://[redacted]@host"},
		{"HTTPS://User:Pw@Host:8443/x", "HTTPS://[redacted]@Host:8443/x"},
		{"https://token@github.com/o/r", "https://[redacted]@github.com/o/r"},
		{"redis://:pw@cache:6379", "redis://[redacted]@cache:6379"},
		{"postgres://app:p@ss@db", "postgres://[redacted]@db"},
		{"postgres://app:pa#ss@db", "postgres://[redacted]@db"},
		{"postgres://app:pa?ss@db/x", "postgres://[redacted]@db/x"},
		{"https://user:p@ss/w0rd@host/", "https://[redacted]@host/"},
		{"https://u:p@host/users/@me", "https://[redacted]@me"}, // a path's '@' after a userinfo: more is hidden, nothing leaks
		{"a https://u:p@h1 and ftp://v:q@h2.", "a https://[redacted]@h1 and ftp://[redacted]@h2."},
		{`url="https://u:p@h"`, `url="https://[redacted]@h"`},
		{"user:pass@host:5432", "[redacted]@host:5432"},
		{"proxy is u:p@proxy:3128 today", "proxy is [redacted]@proxy:3128 today"},
		{"host=db password=s3cret sslmode=require", "host=db password=[redacted] sslmode=require"},
		{"host=db password='s3 cret' x=1", "host=db password=[redacted] x=1"},
		{"Server=db;Password=s3cret;Database=app", "Server=db;Password=[redacted];Database=app"},
		{"https://h/x?a=1&access_token=abc&b=2", "https://h/x?a=1&access_token=[redacted]&b=2"},
		// Kept as written.
		{"", ""},
		{"plain text", "plain text"},
		{"https://example.com/path", "https://example.com/path"},
		{"https://example.com/users/@me", "https://example.com/users/@me"},
		{"https://example.com:8080/a@b", "https://example.com:8080/a@b"},
		{"http://[::1]:8080/x?to=a@b", "http://[::1]:8080/x?to=a@b"},
		{"ops@example.com", "ops@example.com"},
		{"git@github.com:o/r.git", "git@github.com:o/r.git"},
		{"mode=fast name=x", "mode=fast name=x"},
		{"https://@host", "https://@host"},
	} {
		got := config.RedactString(tc.in)
		require.Equal(t, tc.want, got, "RedactString(%q)", tc.in)
		require.Equal(t, got, config.RedactString(got), "redacting %q twice", tc.in)
	}
}

// loadWithin runs config.Load, failing the test if it has not returned
// within loadLimit: reading a FIFO or a device must never block. A Load
// still blocked on a FIFO is released by opening the FIFO's other end.
func loadWithin(t *testing.T, path string, fifos ...string) (*config.Config, error) {
	t.Helper()
	type result struct {
		c   *config.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := config.Load(path)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-time.After(loadLimit):
		for _, f := range fifos {
			if w, err := os.OpenFile(f, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		<-done
		t.Fatalf("config.Load(%s) blocked for %v", path, loadLimit)
		return nil, nil
	}
}

// loadLimit is far beyond what loading a small config takes: reaching it
// means Load blocked.
const loadLimit = 10 * time.Second

// TestIncludeReadsOnlyRegularYAMLFiles: include: names only regular
// *.yaml/*.yml files of bounded size; a device, a FIFO or a file named
// otherwise is refused at once, with the limit named, and nothing of its
// content is read. /dev/null stands for /dev/zero (the same rule refuses
// both): should the rule break, this test fails instead of reading an
// endless device until memory runs out.
func TestIncludeReadsOnlyRegularYAMLFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	fifoInDir := filepath.Join(dir, "conf.d", "p.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(fifoInDir), 0o700))
	require.NoError(t, syscall.Mkfifo(fifoInDir, 0o600))
	require.NoError(t, os.Symlink("/dev/null", filepath.Join(dir, "null.yaml")))
	write("big.yaml", "# "+strings.Repeat("x", config.MaxFileSize)+"\n")
	write("exact.yaml", "service: {max_workers: 3}\n#"+strings.Repeat("x", config.MaxFileSize-len("service: {max_workers: 3}\n#")))

	for _, tc := range []struct {
		name, include string
		want          string // the one error
	}{
		{"device", "/dev/null", "config.yaml:1: include[0]: /dev/null is not a YAML file: include only *.yaml and *.yml files (or a directory of them)"},
		{"not named YAML", "/etc/hostname", "config.yaml:1: include[0]: /etc/hostname is not a YAML file: include only *.yaml and *.yml files (or a directory of them)"},
		{"link to a device", "null.yaml", "config.yaml:1: include[0]: null.yaml links to /dev/null, which is not a YAML file: include only *.yaml and *.yml files"},
		{"FIFO", "fifo.yaml", "config.yaml:1: include[0]: cannot read fifo.yaml: is a named pipe (FIFO), not a regular file: a config file must be a regular file"},
		{"FIFO in a directory", "conf.d/", "config.yaml:1: include[0]: cannot read conf.d/p.yaml: is a named pipe (FIFO), not a regular file: a config file must be a regular file"},
		{"over 1 MiB", "big.yaml", fmt.Sprintf("config.yaml:1: include[0]: cannot read big.yaml: is %d bytes, over the 1 MiB limit for a config file: split it into files joined with include:", config.MaxFileSize+3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sub := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			require.NoError(t, os.Mkdir(sub, 0o700))
			include := tc.include
			if !filepath.IsAbs(include) {
				include = filepath.Join(dir, include)
			}
			cfg := filepath.Join(sub, "config.yaml")
			require.NoError(t, os.WriteFile(cfg, []byte("include: ["+include+"]\n"), 0o600))
			_, err := loadWithin(t, cfg, fifo, fifoInDir)
			var ve *config.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Len(t, ve.Errors, 1, "%v", err)
			// Paths outside the config's directory are shown absolute.
			want := strings.ReplaceAll(tc.want, " "+tc.include+" ", " "+include+" ")
			for _, name := range []string{"null.yaml", "fifo.yaml", "conf.d/p.yaml", "big.yaml"} {
				want = strings.ReplaceAll(want, " "+name+" ", " "+filepath.Join(dir, name)+" ")
				want = strings.ReplaceAll(want, " "+name+":", " "+filepath.Join(dir, name)+":")
			}
			require.Equal(t, want, err.Error())
		})
	}

	t.Run("exactly 1 MiB", func(t *testing.T) {
		t.Parallel()
		c, err := loadWithin(t, filepath.Join(dir, "exact.yaml"))
		require.NoError(t, err)
		require.Equal(t, 3, c.Service.MaxWorkers)
	})

	t.Run("over 4 MiB in all", func(t *testing.T) {
		t.Parallel()
		var names []string
		for i := range 5 {
			name := fmt.Sprintf("part%d.yaml", i)
			names = append(names, name)
			write(filepath.Join("total", name), "#"+strings.Repeat("x", config.MaxFileSize-100)+"\n")
		}
		names = append(names, "part0.yml") // past the limit, reported once
		write(filepath.Join("total", "part0.yml"), "#\n")
		cfg := write(filepath.Join("total", "config.yaml"), "include: ["+strings.Join(names, ", ")+"]\n")
		_, err := loadWithin(t, cfg)
		require.EqualError(t, err, "config.yaml:1: include[4]: part4.yaml takes the config files loaded past 4 MiB in all: merge or remove includes")
	})
}

// TestLoadReadsOnlyARegularFile: the config file itself follows the same
// rules as an include (any name, though). /dev/null stands for /dev/zero,
// as above.
func TestLoadReadsOnlyARegularFile(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	big := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(big, make([]byte, config.MaxFileSize+1), 0o600))
	for path, want := range map[string]string{
		"/dev/null": "load config: read /dev/null: is a character device, not a regular file: a config file must be a regular file",
		fifo:        "load config: read " + fifo + ": is a named pipe (FIFO), not a regular file: a config file must be a regular file",
		big:         fmt.Sprintf("load config: read %s: is %d bytes, over the 1 MiB limit for a config file: split it into files joined with include:", big, config.MaxFileSize+1),
	} {
		_, err := loadWithin(t, path, fifo)
		require.EqualError(t, err, want)
		var ve *config.ValidationError
		require.False(t, errors.As(err, &ve))
	}
}

// TestForeignFileIsNotQuoted: a file that is not a ductile config (here a
// shadow file) is refused before it is read when included under another
// name, and reported in one line that quotes none of it when it is read.
func TestForeignFileIsNotQuoted(t *testing.T) {
	t.Parallel()
	shadow, err := os.ReadFile(fixture(t, "foreign", "shadow"))
	require.NoError(t, err)
	for file, want := range map[string]string{
		"config.yaml":     "config.yaml:1: include[0]: shadow is not a YAML file: include only *.yaml and *.yml files (or a directory of them)",
		"yaml-named.yaml": "shadow.yaml:1: not a ductile config file: none of its 3 top-level keys is a config key (state_dir, plugin_roots, service, plugins, routes, pipelines, topics, api, webhooks, tokens, secrets, include): check the path",
		"shadow":          "shadow:1: not a ductile config file: none of its 3 top-level keys is a config key (state_dir, plugin_roots, service, plugins, routes, pipelines, topics, api, webhooks, tokens, secrets, include): check the path",
	} {
		_, err := config.Load(fixture(t, "foreign", file))
		require.EqualError(t, err, want)
		for _, line := range strings.Split(strings.TrimSpace(string(shadow)), "\n") {
			user, _, _ := strings.Cut(line, ":")
			require.NotContains(t, err.Error(), user+":", "the error quotes the file")
		}
	}
}

// TestSuggest: the "did you mean" of unknown keys, plugin names and commands.
func TestSuggest(t *testing.T) {
	t.Parallel()
	plugin := []string{"enabled", "parallelism", "retry", "timeouts", "config", "schedules"}
	service := []string{"max_workers", "dedupe_ttl", "job_log_retention", "allow_symlinks"}
	for _, tc := range []struct {
		word  string
		names []string
		want  string
	}{
		{"retries", plugin, "retry"},    // a plural
		{"Retry", plugin, "retry"},      // case
		{"retyr", plugin, "retry"},      // a swap is one edit
		{"timeout", plugin, "timeouts"}, // a singular
		{"confg", plugin, "config"},     // a missing letter
		{"max-workers", service, "max_workers"},
		{"workers", service, "max_workers"}, // one whole part of one name
		{"ttl", service, "dedupe_ttl"},
		{"allow_symlink", service, "allow_symlinks"},
		{"hadle", []string{"poll", "handle", "health"}, "handle"},
		{"ehco", []string{"echo", "sink"}, "echo"},
		// No guess.
		{"mode", plugin, ""},
		{"sync", []string{"poll", "handle", "health", "init"}, ""},
		{"x", plugin, ""},
		{"", plugin, ""},
		{"max", []string{"max_workers", "max_attempts"}, ""}, // a part of two names
		{"log", []string{"job_log_retention", "log_level"}, ""},
	} {
		require.Equal(t, tc.want, config.Suggest(tc.word, tc.names), "Suggest(%q, %q)", tc.word, tc.names)
	}
}

// TestCheck: a config that loads can still name plugins and commands that
// are not there; Check finds them, file and line, with a suggestion.
func TestCheck(t *testing.T) {
	t.Parallel()
	c, err := config.Load(loadable(t, "check"))
	require.NoError(t, err)
	installed := map[string]config.InstalledPlugin{
		"echo":  {Commands: []string{"poll", "handle", "health"}, ConfigKeys: []string{"mode"}, Emits: []string{"echo.poll", "echo.handle"}},
		"sink":  {Commands: []string{"handle"}},
		"quiet": {Commands: []string{"handle"}},
	}
	errs, warnings := c.Check(installed, []string{"broken"})
	lines := func(fes []config.FieldError) []string {
		out := []string{}
		for _, fe := range fes {
			out = append(out, fe.Error())
		}
		return out
	}
	require.Equal(t, []string{
		`config.yaml:3: plugins.ecko: no plugin named "ecko" was found, so these settings apply to nothing: did you mean echo? (see: ductile plugin list)`,
		`config.yaml:10: routes[0].to: no plugin named "snik" was found, so every event this route matches would make a job that fails at once: did you mean sink? (see: ductile plugin list)`,
		`config.yaml:11: routes[1].command: plugin "sink" has no command "handel": did you mean handle? (its commands: handle)`,
		`config.yaml:12: routes[2].from: no plugin named "nosuch" was found, so this route can never fire (see: ductile plugin list)`,
		`config.yaml:14: routes[4].to: plugin "broken" was skipped (the reason is among the errors), so every event this route matches would make a job that fails at once`,
		`more.yaml:3: routes[9].to: no plugin named "ech" was found, so every event this route matches would make a job that fails at once: did you mean echo? (see: ductile plugin list)`,
		`more.yaml:8: plugins.sink.schedules[0]: runs poll (the default command), but plugin "sink" has no command poll (its commands: handle): set command: to one of them`,
		`more.yaml:11: plugins.echo.schedules[0].command: plugin "echo" has no command "pol": did you mean poll? (its commands: poll, handle, health)`,
	}, lines(errs))
	require.Equal(t, []string{
		`config.yaml:4: plugins.gone: no plugin named "gone" was found, so this entry does nothing (it is disabled: harmless) (see: ductile plugin list)`,
		`config.yaml:6: plugins.echo.config.mdoe: plugin "echo" does not declare this key: did you mean mode? (its config_keys: mode); it is passed on, but the plugin may never read it`,
		`config.yaml:11: routes[1]: route cycle echo -> sink -> echo: a job may route back to a plugin it came from; service.max_route_depth (20) stops such a chain`,
		`config.yaml:13: routes[3].event_type: plugin "echo" does not declare emitting "echo.pol": did you mean echo.poll? (its manifest declares: echo.poll, echo.handle)`,
		`config.yaml:15: routes[5].from: plugin "quiet" is disabled (plugins.quiet.enabled: false): the route cannot fire until it is enabled`,
		`config.yaml:16: routes[6].to: plugin "quiet" is disabled (plugins.quiet.enabled: false): jobs this route makes fail at once`,
		`config.yaml:16: routes[6]: route cycle echo -> quiet -> sink -> echo: a job may route back to a plugin it came from; service.max_route_depth (20) stops such a chain`,
		`more.yaml:14: plugins.quiet.schedules: plugin "quiet" is disabled (plugins.quiet.enabled: false): its schedules do not fire until it is enabled`,
	}, lines(warnings))

	require.Empty(t, c.Unused(), "pipelines are compiled by package pipeline: config check reports their errors")

	// Built-in defaults name nothing, so there is nothing to find.
	errs, warnings = config.Default().Check(installed, nil)
	require.Empty(t, errs)
	require.Empty(t, warnings)
	require.Empty(t, config.Default().Unused())
}

// runs_on takes local, remote or any (empty: local) and refuses anything
// else with the words it takes.
func TestRunsOn(t *testing.T) {
	for _, tc := range []struct {
		yaml          string
		local, remote bool
	}{{"", true, false}, {"runs_on: local", true, false}, {"runs_on: remote", false, true}, {"runs_on: any", true, true}} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("plugins:\n  echo:\n    enabled: true\n    "+tc.yaml+"\n"), 0o600))
		cfg, err := config.LoadUnverified(filepath.Join(dir, "config.yaml"))
		require.NoError(t, err, tc.yaml)
		require.Equal(t, tc.local, cfg.Plugin("echo").RunsOn.Local(), tc.yaml)
		require.Equal(t, tc.remote, cfg.Plugin("echo").RunsOn.Remote(), tc.yaml)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("plugins:\n  echo:\n    runs_on: elsewhere\n"), 0o600))
	_, err := config.LoadUnverified(filepath.Join(dir, "config.yaml"))
	require.ErrorContains(t, err, "must be local, remote or any")
}

// A plugin placed on remote workers need not be installed here: neither
// its entry nor a route to or from it is an error.
func TestCheckRemotePlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yaml := "plugins:\n  render:\n    runs_on: remote\n  local:\n    enabled: true\nroutes:\n  - {from: render, event_type: render.done, to: render, command: handle}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yaml), 0o600))
	c, err := config.LoadUnverified(filepath.Join(dir, "config.yaml"))
	require.NoError(t, err)
	errs, _ := c.Check(map[string]config.InstalledPlugin{}, nil)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), `plugins.local: no plugin named "local" was found`, "only the plugin that runs here must be installed")
}
