package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

func TestCircuitBreakerConfig(t *testing.T) {
	t.Parallel()
	load := func(t *testing.T, text string) (*config.Config, error) {
		path := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		return config.Load(path)
	}
	c, err := load(t, `plugins:
  echo: {}
  slow: {circuit_breaker: {threshold: 5, reset_after: 2d}}
  off: {circuit_breaker: {enabled: false}}
`)
	require.NoError(t, err)
	require.Equal(t, config.CircuitBreaker{Enabled: true, Threshold: 3, ResetAfter: 30 * time.Minute}, c.Plugin("echo").CircuitBreaker)
	require.Equal(t, config.DefaultCircuitBreaker(), c.Plugin("unmentioned").CircuitBreaker)
	require.Equal(t, config.CircuitBreaker{Enabled: true, Threshold: 5, ResetAfter: 48 * time.Hour}, c.Plugin("slow").CircuitBreaker)
	require.Equal(t, config.CircuitBreaker{Enabled: false, Threshold: 3, ResetAfter: 30 * time.Minute}, c.Plugin("off").CircuitBreaker)

	for _, tc := range []struct{ text, want string }{
		{`plugins: {echo: {circuit_breaker: {threshold: 0}}}`, "plugins.echo.circuit_breaker.threshold: must be ≥ 1, got 0"},
		{`plugins: {echo: {circuit_breaker: {reset_after: 30}}}`, "plugins.echo.circuit_breaker.reset_after: must be a duration with a unit"},
		{`plugins: {echo: {circuit_breaker: {reset_after: 0s}}}`, "plugins.echo.circuit_breaker.reset_after: must be greater than 0"},
		{`plugins: {echo: {circuit_breaker: {treshold: 2}}}`, "did you mean threshold?"},
		{`plugins: {echo: {circuit_breaker: 3}}`, "plugins.echo.circuit_breaker"},
	} {
		_, err := load(t, tc.text)
		require.ErrorContains(t, err, tc.want, tc.text)
	}
}
