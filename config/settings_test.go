package config_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

const settingsYAML = `
service:
  max_workers: 3
  dedupe_ttl: 2h
plugins:
  echo:
    parallelism: 2
    retry: {max_attempts: 7, backoff_base: 5s}
    timeouts: {handle: 9s}
    config:
      api_token: hunter2-secret
      endpoint: https://user:pa55word@example.com/x
    schedules:
      - every: 5m
        jitter: 30s
        only_between: "22:00-06:00"
        payload: {password: s3cret-payload}
routes:
  - {from: echo, event_type: done, to: echo, command: handle}
webhooks:
  endpoints:
    - {path: /hook, plugin: echo, secret_ref: hook}
secrets:
  hook: webhook-s3cret
`

func loadSettingsConfig(t *testing.T, content string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	cfg, err := lockAndLoad(t, path)
	require.NoError(t, err)
	return cfg
}

func TestSettingsHoldNoSecrets(t *testing.T) {
	s := loadSettingsConfig(t, settingsYAML).Settings()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	for _, secret := range []string{"hunter2-secret", "pa55word", "s3cret-payload", "webhook-s3cret"} {
		require.NotContains(t, string(b), secret)
	}
	require.Regexp(t, `^blake3:[0-9a-f]{64}$`, s.Plugins["echo"].ConfigHash)
	require.Contains(t, s.Sections, "webhooks")
	require.Len(t, s.Files, 1)
	require.Regexp(t, `^blake3:[0-9a-f]{64}$`, s.Files[0].BLAKE3)
}

func TestSettingsRebuildTheTypedConfig(t *testing.T) {
	cfg := loadSettingsConfig(t, settingsYAML)
	s := cfg.Settings()
	// Through JSON, as config.applied stores it.
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var stored events.Settings
	require.NoError(t, json.Unmarshal(b, &stored))

	back, err := config.FromSettings(stored)
	require.NoError(t, err)
	require.Equal(t, cfg.Service, back.Service)
	require.Equal(t, cfg.Routes, back.Routes)
	require.Equal(t, cfg.Source, back.Source)
	want, got := cfg.Plugin("echo"), back.Plugin("echo")
	require.Equal(t, want.Retry, got.Retry)
	require.Equal(t, want.Timeouts, got.Timeouts)
	require.Equal(t, want.Parallelism, got.Parallelism)
	require.Len(t, got.Schedules, 1)
	require.Equal(t, want.Schedules[0].Rule.String(), got.Schedules[0].Rule.String())
	require.Equal(t, want.Schedules[0].OnlyBetween, got.Schedules[0].OnlyBetween)
	require.Empty(t, got.Config, "plugin config values are not recorded")
	// Rebuilt, the settings differ only in what was never recorded.
	require.Equal(t, []string{"plugins.echo.config_hash", "sections.secrets", "sections.webhooks"}, diffPaths(config.DiffSettings(back.Settings(), stored)))
}

func TestSettingsHashFollowsTheSettingsNotTheFile(t *testing.T) {
	a := loadSettingsConfig(t, settingsYAML).Settings()
	b := loadSettingsConfig(t, "# a comment\n"+settingsYAML).Settings()
	require.Equal(t, a.Hash, b.Hash, "a comment changes no setting")
	require.NotEqual(t, a.Files[0].BLAKE3, b.Files[0].BLAKE3)

	c := loadSettingsConfig(t, strings.Replace(settingsYAML, "max_workers: 3", "max_workers: 4", 1)).Settings()
	require.NotEqual(t, a.Hash, c.Hash)
	require.Equal(t, []events.SettingChange{{Path: "service.max_workers", File: float64(4), Applied: float64(3)}}, config.DiffSettings(c, a))
}

func TestSettingsDiffComparesPluginConfigByHash(t *testing.T) {
	a := loadSettingsConfig(t, settingsYAML).Settings()
	b := loadSettingsConfig(t, `
plugins:
  echo:
    config: {api_token: other}
`).Settings()
	paths := diffPaths(config.DiffSettings(b, a))
	require.Contains(t, paths, "plugins.echo.config_hash")
	require.Contains(t, paths, "service.max_workers")
	for _, d := range config.DiffSettings(b, a) {
		require.NotContains(t, fmt.Sprint(d.File), "other")
	}
}

func diffPaths(ds []events.SettingChange) []string {
	var paths []string
	for _, d := range ds {
		paths = append(paths, d.Path)
	}
	return paths
}

func TestSettingsDiffMatchesEntries(t *testing.T) {
	a := loadSettingsConfig(t, settingsYAML).Settings()
	b := loadSettingsConfig(t, strings.Replace(settingsYAML, "every: 5m", "every: 10m", 1)).Settings()
	require.Equal(t, []events.SettingChange{{Path: "plugins.echo.schedules[default].every", File: "10m", Applied: "5m"}}, config.DiffSettings(b, a))
	c := loadSettingsConfig(t, strings.Replace(settingsYAML, "to: echo, command: handle", "to: echo, command: poll", 1)).Settings()
	require.Equal(t, []string{"routes[0].command"}, diffPaths(config.DiffSettings(c, a)))

	// An entry added before the others is one difference, matched by id.
	added := strings.Replace(settingsYAML, "    schedules:\n", "    schedules:\n      - {id: first, cron: \"0 3 * * *\"}\n", 1)
	d := config.DiffSettings(loadSettingsConfig(t, added).Settings(), a)
	require.Equal(t, []string{"plugins.echo.schedules[first]"}, diffPaths(d))
	require.Nil(t, d[0].Applied)
	require.Equal(t, "0 3 * * *", d[0].File.(map[string]any)["cron"])
	// A plugin added is one difference too.
	withPlugin := loadSettingsConfig(t, strings.Replace(settingsYAML, "plugins:\n", "plugins:\n  other: {parallelism: 3, schedules: [{every: 1m}]}\n", 1)).Settings()
	require.Equal(t, []string{"plugins.other"}, diffPaths(config.DiffSettings(withPlugin, a)))
	// …and removed, the other way round.
	require.Equal(t, []string{"plugins.echo.schedules[first]"}, diffPaths(config.DiffSettings(a, loadSettingsConfig(t, added).Settings())))
}

// TestSettingsRecordedBeforeLeasePeriodRebuild: settings recorded before
// service.lease_period existed (no lease_period) rebuild with its default.
func TestSettingsRecordedBeforeLeasePeriodRebuild(t *testing.T) {
	stored := config.Default().Settings()
	stored.Service.LeasePeriod = ""
	b, err := json.Marshal(stored.Service)
	require.NoError(t, err)
	require.NotContains(t, string(b), "lease_period", "an absent lease period is not recorded")
	back, err := config.FromSettings(stored)
	require.NoError(t, err)
	require.Equal(t, config.DefaultLeasePeriod, back.Service.LeasePeriod)
}
