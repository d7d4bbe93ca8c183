package config_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/settings.golden.json")

// recordYAML sets every setting config.applied records but the tokens
// (TestTokens), with paths that do not depend on where the test runs.
const recordYAML = `
state_dir: /var/lib/ductile
plugin_roots: [/srv/ductile/plugins]
service:
  max_workers: 3
  dedupe_ttl: 2h
  job_log_retention: 7d
  allow_symlinks: true
  max_route_depth: 6
  max_hook_depth: 3
  lease_period: 12s
plugins:
  echo:
    parallelism: 2
    max_outstanding_polls: 2
    notify_on_complete: true
    retry: {max_attempts: 7, backoff_base: 5s}
    timeouts: {poll: 1m, handle: 9s, health: 4s, init: 20s}
    circuit_breaker: {threshold: 4, reset_after: 10m}
    config:
      api_token: hunter2-secret
    schedules:
      - every: 5m
        jitter: 30s
        only_between: "22:00-06:00"
        payload: {password: s3cret-payload, depth: 3}
      - id: nightly
        command: handle
        cron: "30 2 * * 1-5"
        timezone: Europe/Berlin
        not_on: [friday]
        preferred_window: ["01:00-02:00"]
        catch_up: run_once
        if_running: cancel
      - {id: once, at: "2026-12-01T09:00:00+01:00"}
      - {id: warmup, after: 10s, command: handle, timezone: UTC}
  quiet:
    enabled: false
routes:
  - {from: echo, event_type: done, to: echo, command: handle}
pipelines:
  - name: p
    on: done
    steps:
      - uses: echo.handle
webhooks:
  endpoints:
    - {path: /hook, plugin: echo, secret_ref: hook}
secrets:
  hook: webhook-s3cret
`

// The settings config.applied records are pinned as config builds them:
// config converts its own types to events.Settings field by field, so
// renaming or retyping a field of config's (or the key it has in config
// show) leaves this golden, and every ledger's config.applied, unchanged.
// Source and Files are left out: they name the test's temporary file.
func TestSettingsGolden(t *testing.T) {
	s := loadSettingsConfig(t, recordYAML).Settings()
	s.Source, s.Files = "", nil
	got, err := json.Marshal(s)
	require.NoError(t, err)
	path := filepath.Join("testdata", "settings.golden.json")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -run TestSettingsGolden -update")
	require.Equal(t, string(want), string(got), "the settings config.applied records changed: if that is deliberate, run go test -run TestSettingsGolden -update")
}
