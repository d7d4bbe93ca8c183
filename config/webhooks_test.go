package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

func loadWebhooks(t *testing.T, content string) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return lockAndLoad(t, path)
}

func TestWebhooksDefaults(t *testing.T) { // not parallel: Setenv
	cfg, err := loadWebhooks(t, `
webhooks:
  endpoints:
    - {path: /hook/github, plugin: github, secret_ref: gh}
    - path: /hook/stripe
      plugin: stripe
      command: receive
      secret_ref: st
      signature_header: stripe-signature
      max_body_size: 512KiB
      delivery_id_header: x-request-id
      timestamp_header: x-timestamp
secrets:
  gh: ${WEBHOOK_TEST_SECRET}
  st: literal
`)
	require.Error(t, err, "an unset ${VAR} fails the load")

	t.Setenv("WEBHOOK_TEST_SECRET", "from-env")
	cfg, err = loadWebhooks(t, `
webhooks:
  endpoints:
    - {path: /hook/github, plugin: github, secret_ref: gh}
    - path: /hook/stripe
      plugin: stripe
      command: receive
      secret_ref: st
      signature_header: stripe-signature
      max_body_size: 512KiB
      delivery_id_header: x-request-id
      timestamp_header: x-timestamp
secrets:
  gh: ${WEBHOOK_TEST_SECRET}
  st: literal
`)
	require.NoError(t, err)
	require.Equal(t, config.WebhookSettings{Listen: "127.0.0.1:8081", Endpoints: []config.WebhookEndpoint{
		{Path: "/hook/github", Plugin: "github", Command: "handle", SecretRef: "gh", SignatureHeader: "X-Hub-Signature-256", MaxBodySize: 1 << 20},
		{Path: "/hook/stripe", Plugin: "stripe", Command: "receive", SecretRef: "st", SignatureHeader: "Stripe-Signature", MaxBodySize: 512 << 10,
			DeliveryIDHeader: "X-Request-Id", TimestampHeader: "X-Timestamp", Tolerance: 5 * time.Minute},
	}}, cfg.WebhookSettings)
	require.Equal(t, "from-env", cfg.Secrets["gh"])
	_, ok := cfg.Secrets["nope"]
	require.False(t, ok)
	e, ok := cfg.WebhookSettings.Endpoint("/hook/stripe")
	require.True(t, ok)
	require.Equal(t, "stripe", e.Plugin)
}

func TestWebhooksErrors(t *testing.T) {
	t.Parallel()
	_, err := loadWebhooks(t, `webhooks:
  listen: localhost
  endpoints:
    - {path: hook, plugin: a, secret_ref: s}
    - {path: /healthz, plugin: a, secret_ref: s}
    - {path: /a//b/, plugin: a, secret_ref: s}
    - {path: /a, plugin: a, secret_ref: s}
    - {path: /a, plugin: b, secret_ref: s}
    - {path: /c, plugin: c, secret_ref: s, max_body_size: 1 parsec}
    - {path: /d, plugin: d, secret_ref: s, max_body_size: 1GB}
    - {path: /e, plugin: e, secret_ref: s, tolerance: 5m}
    - {path: /f, plugin: f, secret_ref: s, signature_header: "bad header"}
    - {path: /g, plugin: g, secrt: x}
secrets: [a]
`)
	var ve *config.ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	var got []string
	for _, fe := range ve.Errors {
		got = append(got, fe.Error())
	}
	require.Equal(t, []string{
		`config.yaml:2: webhooks.listen: invalid address "localhost": give host:port, e.g. 127.0.0.1:8081`,
		`config.yaml:4: webhooks.endpoints[0].path: must start with /, e.g. /hook/github`,
		`config.yaml:5: webhooks.endpoints[1].path: /healthz is the listener's health check: choose another path`,
		`config.yaml:6: webhooks.endpoints[2].path: must be a clean path (no //, /./, /../ or trailing /): write /a/b`,
		`config.yaml:8: webhooks.endpoints[4].path: path "/a" is already used by webhooks.endpoints[3]: give each endpoint its own path`,
		`config.yaml:9: webhooks.endpoints[5].max_body_size: invalid size "1 parsec": give a whole number with a unit, e.g. 1MB, 512KiB or 1MiB (units: B, KB, MB, GB, KiB, MiB, GiB)`,
		`config.yaml:10: webhooks.endpoints[6].max_body_size: must be from 1 byte to 64MiB, got 1GB`,
		`config.yaml:11: webhooks.endpoints[7].tolerance: applies only with timestamp_header: name the header holding the signed timestamp, or leave tolerance out`,
		`config.yaml:12: webhooks.endpoints[8].signature_header: invalid header name "bad header": use letters, digits and -, e.g. X-Hub-Signature-256`,
		`config.yaml:13: webhooks.endpoints[9].secrt: unknown key (valid keys: command, delivery_id_header, max_body_size, path, plugin, secret_ref, signature_header, timestamp_header, tolerance)`,
		`config.yaml:13: webhooks.endpoints[9].secret_ref: missing: name the secret the sender signs with (every endpoint checks a signature)`,
		`config.yaml:14: secrets: must be a mapping of secret name to value, e.g. secrets: {github: ${GITHUB_WEBHOOK_SECRET}}`,
	}, got)
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"1": 1, "1B": 1, "1KB": 1000, "1kb": 1000, "1MB": 1000000, "1MiB": 1 << 20, "512KiB": 512 << 10, "2 GiB": 2 << 30, "1048576": 1 << 20,
	} {
		got, err := config.ParseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "MB", "1M", "1.5MB", "-1", "-1KB", "1TB", "1 M B", "99999999999999999999GB"} {
		_, err := config.ParseSize(in)
		require.Error(t, err, in)
	}
}

func TestCheckWebhooks(t *testing.T) {
	t.Parallel()
	cfg, err := loadWebhooks(t, `webhooks:
  endpoints:
    - {path: /a, plugin: echo, secret_ref: s}
    - {path: /b, plugin: ecko, secret_ref: s}
    - {path: /c, plugin: echo, command: pol, secret_ref: s}
    - {path: /d, plugin: sink, secret_ref: s}
    - {path: /e, plugin: quiet, secret_ref: t}
plugins:
  quiet: {enabled: false}
secrets:
  s: x
`)
	require.NoError(t, err)
	installed := map[string]config.InstalledPlugin{
		"echo":  {Commands: []string{"poll", "handle"}},
		"sink":  {Commands: []string{"store"}},
		"quiet": {Commands: []string{"handle"}},
	}
	errs, warnings := cfg.Check(installed, nil)
	lines := func(fes []config.FieldError) []string {
		out := []string{}
		for _, fe := range fes {
			out = append(out, fe.Error())
		}
		return out
	}
	require.Equal(t, []string{
		`config.yaml:4: webhooks.endpoints[1].plugin: no plugin named "ecko" was found, so every delivery would make a job that fails at once: did you mean echo? (see: ductile plugin list)`,
		`config.yaml:5: webhooks.endpoints[2].command: plugin "echo" has no command "pol": did you mean poll? (its commands: poll, handle)`,
		`config.yaml:6: webhooks.endpoints[3]: plugin "sink" has no command handle (the default command): set command: to one of its commands (store)`,
		`config.yaml:7: webhooks.endpoints[4].secret_ref: no secret named "t" in secrets:; add it (e.g. t: ${ENV_VAR}), or name one that exists`,
	}, lines(errs))
	require.Equal(t, []string{
		`config.yaml:7: webhooks.endpoints[4].plugin: plugin "quiet" is disabled (plugins.quiet.enabled: false): jobs this endpoint makes fail at once`,
	}, lines(warnings))
	require.Empty(t, cfg.Unused(), "webhooks are used now")
}
