package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

// unsetEnv makes sure the variables are not set for the test (and
// restores them after).
func unsetEnv(t *testing.T, names ...string) {
	for _, name := range names {
		t.Setenv(name, "")
		require.NoError(t, os.Unsetenv(name))
	}
}

// TestLoadDeferredLeavesUnsetVariablesToWhatUsesThem: Load refuses a
// ${VAR} whose variable is not set, naming it (not redacted); LoadDeferred
// leaves it as written (a typed value keeps its default, unchecked) and
// lists it, and UnsetFor keeps only what running a plugin's jobs here
// uses: that plugin's config and the core's settings, not the secrets,
// tokens, webhooks or api, nor another plugin's config. The state
// directory, plugin roots and includes are needed everywhere: never
// deferred.
func TestLoadDeferredLeavesUnsetVariablesToWhatUsesThem(t *testing.T) {
	unsetEnv(t, "DT_SECRET", "DT_ECHO", "DT_OTHER", "DT_WORKERS", "DT_STATE")
	path := writeFiles(t, t.TempDir(), map[string]string{"config.yaml": `
service: {max_workers: "${DT_WORKERS}"}
plugins:
  echo: {config: {token: "${DT_ECHO}"}}
  other: {config: {token: "x-${DT_OTHER}"}}
secrets:
  hook: ${DT_SECRET}
`})
	_, err := config.Load(path)
	var ve *config.ValidationError
	require.ErrorAs(t, err, &ve)
	var lines []string
	for _, fe := range ve.Errors {
		if strings.Contains(fe.Msg, "environment variable") {
			lines = append(lines, fe.Error())
		}
	}
	require.Equal(t, []string{
		"config.yaml:2: service.max_workers: environment variable DT_WORKERS is not set: export DT_WORKERS=… or use ${DT_WORKERS:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
		"config.yaml:4: plugins.echo.config.token: environment variable DT_ECHO is not set: export DT_ECHO=… or use ${DT_ECHO:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
		"config.yaml:5: plugins.other.config.token: environment variable DT_OTHER is not set: export DT_OTHER=… or use ${DT_OTHER:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
		"config.yaml:7: secrets.hook: environment variable DT_SECRET is not set: export DT_SECRET=… or use ${DT_SECRET:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)",
	}, lines)

	cfg, err := config.LoadUnlocked(path) // deferred, as every CLI load; no .checksums yet
	require.NoError(t, err)
	require.Equal(t, config.Default().Service.MaxWorkers, cfg.Service.MaxWorkers, "an unknown value keeps its default")
	require.Equal(t, "${DT_ECHO}", cfg.Plugin("echo").Config["token"])
	paths := func(fes []config.FieldError) []string {
		var out []string
		for _, fe := range fes {
			out = append(out, fe.Path)
		}
		return out
	}
	require.Equal(t, []string{"service.max_workers", "plugins.echo.config.token", "plugins.other.config.token", "secrets.hook"}, paths(cfg.Unset()))
	require.Equal(t, lines, func() (out []string) {
		for _, fe := range cfg.Unset() {
			out = append(out, fe.Error())
		}
		return out
	}(), "the same errors as Load's")
	require.Equal(t, []string{"service.max_workers", "plugins.echo.config.token"}, paths(cfg.UnsetFor("echo")))
	require.Equal(t, []string{"service.max_workers"}, paths(cfg.UnsetFor("ech")))
	require.Equal(t, []string{"DT_SECRET"}, cfg.UnsetBehind("sections.secrets"))
	require.Equal(t, []string{"DT_ECHO"}, cfg.UnsetBehind("plugins.echo.config_hash"))
	require.Empty(t, cfg.UnsetBehind("plugins.echo.retry.max_attempts"))
	warnings := cfg.UnsetWarnings()
	require.Len(t, warnings, 4)
	require.Equal(t, "config.yaml:7: secrets.hook: environment variable DT_SECRET is not set in this shell: the daemon needs it in its own environment (with systemd: EnvironmentFile=, see docs/running-as-a-service.md); a daemon started from this shell would refuse the config", warnings[3].Error())

	// Where everything else is: needed by every command.
	path = writeFiles(t, t.TempDir(), map[string]string{"config.yaml": "state_dir: ${DT_STATE}\n"})
	_, err = config.LoadDeferred(path)
	require.ErrorContains(t, err, "config.yaml:1: state_dir: environment variable DT_STATE is not set")
}

// TestExamineReportsEveryProblemTogether: the files' own errors and those
// of .checksums come in one run; with only the latter, the config is
// returned too, so that a check can go on to the plugins.
func TestExamineReportsEveryProblemTogether(t *testing.T) {
	t.Parallel()
	path := writeFiles(t, t.TempDir(), map[string]string{"config.yaml": "secrets: {hook: x}\n"})
	_, _, err := config.Lock(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte("secrets: {hook: x}\nroutes: [{from: echo, event_type: e, to: ecko}]\n"), 0o600))
	cfg, errs, err := config.Examine(path, true)
	require.NoError(t, err)
	require.NotNil(t, cfg, "only the checksum refuses it")
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "config.yaml: changed since ductile config lock")
	require.Equal(t, "ecko", cfg.Routes[0].To)

	require.NoError(t, os.WriteFile(path, []byte("secrets: {hook: x}\nroutez: []\n"), 0o600))
	cfg, errs, err = config.Examine(path, true)
	require.NoError(t, err)
	require.Nil(t, cfg)
	require.Len(t, errs, 2)
	require.Contains(t, errs[0].Error(), "config.yaml:2: routez: unknown key: did you mean routes?")
	require.Contains(t, errs[1].Error(), "config.yaml: changed since ductile config lock")
	_, err = config.Load(path)
	require.EqualError(t, err, errs[0].Error()+"\n"+errs[1].Error())
}
