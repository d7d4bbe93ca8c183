package config_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

func TestAPISection(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		path := dir + "/config.yaml"
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		return path
	}
	cfg, err := config.Load(write("service: {}\n"))
	require.NoError(t, err)
	require.Equal(t, config.DefaultAPIServer(), cfg.APIServer, "no api: section: the API on its defaults")
	cfg, err = config.Load(write("api: {enabled: false}\n"))
	require.NoError(t, err)
	require.False(t, cfg.APIServer.Enabled)

	cfg, err = config.Load(write("api: {}\n"))
	require.NoError(t, err)
	require.Equal(t, config.DefaultAPIServer(), cfg.APIServer)

	cfg, err = config.Load(write("api:\n  listen: 127.0.0.1:9090\n  max_body_size: 2KB\n  write_timeout: 5s\n  max_concurrent_sync: 3\n"))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9090", cfg.APIServer.Listen)
	require.Equal(t, int64(2000), cfg.APIServer.MaxBodySize)
	require.Equal(t, 5*time.Second, cfg.APIServer.WriteTimeout)
	require.Equal(t, 3, cfg.APIServer.MaxConcurrentSync)
	require.Equal(t, config.DefaultAPIMaxSyncTimeout, cfg.APIServer.MaxSyncTimeout, "not written: the default")

	cfg, err = config.Load(write("api:\n  max_sync_timeout: 90s\n"))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, cfg.APIServer.MaxSyncTimeout)
	require.Equal(t, config.DefaultAPIMaxConcurrentSync, cfg.APIServer.MaxConcurrentSync, "not written: the default")

	_, err = config.Load(write("api:\n  max_concurrent_sync: 0\n  max_sync_timeout: 0s\n"))
	require.ErrorContains(t, err, "api.max_concurrent_sync: must be ≥ 1, got 0")
	require.ErrorContains(t, err, "api.max_sync_timeout: must be greater than 0")
	_, err = config.Load(write("api:\n  max_concurrent_sync: lots\n  max_sync_timeout: 300\n"))
	require.ErrorContains(t, err, "api.max_concurrent_sync: must be a whole number")
	require.ErrorContains(t, err, "api.max_sync_timeout: must be a duration with a unit")

	_, err = config.Load(write("api:\n  listen: nowhere\n  max_body_size: lots\n  lisen: x\n"))
	require.ErrorContains(t, err, "api.listen: must be host:port")
	require.ErrorContains(t, err, `api.max_body_size: invalid size "lots"`)
	require.ErrorContains(t, err, "api.lisen: unknown key: did you mean listen?")
}
