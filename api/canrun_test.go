package api_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/pluginhost"
)

// TestEnqueueRefusesAPluginThatCannotRun: a plugin the daemon loaded whose
// files can no longer be run (made not executable since it loaded) is 503
// unavailable with the reason, and nothing is enqueued; once it can run
// again, its command is enqueued. (Not parallel:
// TestZOpenAPIResponsesAreReal, run after the serial tests, needs its 503.)
func TestEnqueueRefusesAPluginThatCannotRun(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "echo")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\nname: echo\n"+
		"version: 1.0.0\nprotocol: 2\nentrypoint: run.sh\ncommands: {poll: {type: read}, handle: {type: write}}\n"), 0o644))
	run := filepath.Join(dir, "run.sh")
	require.NoError(t, os.WriteFile(run, []byte("#!/bin/sh\necho '{\"status\":\"ok\"}'\n"), 0o755))
	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	f := start(t, func(o *api.Options) {
		eng := engine.New(engine.Options{Ledger: o.Ledger, Config: config.Default(), Applied: applied, Plugins: reg})
		o.Engine = func() *engine.Engine { return eng }
	})
	require.NoError(t, os.Chmod(run, 0o644))
	head, err := f.l.LastSeq(context.Background())
	require.NoError(t, err)
	r := f.do("POST", "/plugin/echo/handle", "plugin-rw", nil)
	requireError(t, r, http.StatusServiceUnavailable, "unavailable")
	require.Equal(t, `plugin "echo" cannot run now: entrypoint run.sh is not executable: chmod +x `+run, r.body["message"])
	require.Contains(t, r.body["hint"], "nothing was enqueued")
	after, err := f.l.LastSeq(context.Background())
	require.NoError(t, err)
	require.Equal(t, head, after, "nothing is appended")
	require.NoError(t, os.Chmod(run, 0o755))
	r = f.do("POST", "/plugin/echo/handle", "plugin-rw", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
}
