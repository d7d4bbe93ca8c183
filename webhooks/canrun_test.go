package webhooks_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/pluginhost"
)

// TestDeliveryForAPluginThatCannotRunIsRefused: a signed delivery whose
// plugin cannot run now (its entrypoint made not executable since it
// loaded: engine.Target) is 503 unavailable, with no detail for the
// sender, and enqueues nothing; once it can, the same delivery is accepted.
// An unsigned one is still a bare 403: the plugin's state is told only to a
// sender that holds the secret.
func TestDeliveryForAPluginThatCannotRunIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := t.TempDir()
	dir := filepath.Join(root, "echo")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\nname: echo\n"+
		"version: 1.0.0\nprotocol: 2\nentrypoint: run.sh\ncommands: {poll: {type: read}, handle: {type: write}}\n"), 0o644))
	run := filepath.Join(dir, "run.sh")
	require.NoError(t, os.WriteFile(run, []byte("#!/bin/sh\necho '{\"status\":\"ok\"}'\n"), 0o755))
	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	eng := b.engine.Load()
	b.engine.Store(engine.New(engine.Options{Ledger: eng.Ledger(), Config: eng.Config(), Applied: eng.Applied(), Plugins: reg}))

	require.NoError(t, os.Chmod(run, 0o644))
	body := `{"n":1}`
	code, out := b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": sig(body)})
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	require.Equal(t, map[string]any{"code": "unavailable", "message": "this endpoint's plugin cannot run now: nothing was enqueued",
		"hint": "deliver it again later; the daemon's log says why"}, out)
	code, out = b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": "sha256=00"})
	require.Equal(t, http.StatusForbidden, code, "%v", out)
	require.Empty(t, b.jobs(t))

	require.NoError(t, os.Chmod(run, 0o755))
	code, out = b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": sig(body)})
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Len(t, b.jobs(t), 1)
}
