package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

const hooksYAML = `
service: {max_hook_depth: 5}
plugins:
  flaky: {notify_on_complete: true}
`

// TestHookSettingsSurviveShowAndApplied: notify_on_complete and
// service.max_hook_depth are printed by config show (which loads back to
// the same config) and recorded in config.applied (which rebuilds them).
func TestHookSettingsSurviveShowAndApplied(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(hooksYAML), 0o600))
	c, err := config.Load(path)
	require.NoError(t, err)
	require.True(t, c.Plugin("flaky").NotifyOnComplete)
	require.Equal(t, 5, c.Service.MaxHookDepth)

	y, err := yaml.Marshal(c)
	require.NoError(t, err)
	shown := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(shown, y, 0o600))
	back, err := config.Load(shown)
	require.NoError(t, err, string(y))
	require.True(t, back.Plugin("flaky").NotifyOnComplete, string(y))
	require.Equal(t, 5, back.Service.MaxHookDepth, string(y))

	b, err := json.Marshal(c.Settings())
	require.NoError(t, err)
	var stored events.Settings
	require.NoError(t, json.Unmarshal(b, &stored))
	rebuilt, err := config.FromSettings(stored)
	require.NoError(t, err)
	require.True(t, rebuilt.Plugin("flaky").NotifyOnComplete, string(b))
	require.Equal(t, 5, rebuilt.Service.MaxHookDepth, string(b))

	off := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(off, []byte("plugins: {flaky: {}}\n"), 0o600))
	o, err := config.Load(off)
	require.NoError(t, err)
	require.Contains(t, config.DiffSettings(o.Settings(), c.Settings()), events.SettingChange{Path: "plugins.flaky.notify_on_complete", File: false, Applied: true})
}
