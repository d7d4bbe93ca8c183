package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
)

// freeAddr is a 127.0.0.1 address nothing listens on.
func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// The API serves while the daemon runs, with no tokens answers 401 with a
// hint, and is gone after Close; a taken address fails Open when api.listen
// names it, and only turns the API off when it is the default.
func TestDaemonServesTheAPI(t *testing.T) {
	addr := freeAddr(t)
	cfg := config.Default()
	cfg.APIServer = config.DefaultAPIServer()
	cfg.APIServer.Listen, cfg.APIServer.ListenSet = addr, true
	d, err := daemon.Open(context.Background(), daemon.Options{StateDir: t.TempDir(), Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)

	res, err := http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode)
	res.Body.Close()
	res, err = http.Get("http://" + addr + "/jobs")
	require.NoError(t, err)
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 401, res.StatusCode)
	var body map[string]string
	require.NoError(t, json.Unmarshal(raw, &body))
	require.Contains(t, body["hint"], "ductile config token create")

	_, err = daemon.Open(context.Background(), daemon.Options{StateDir: t.TempDir(), Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "api.listen")
	fallback := *cfg
	fallback.APIServer.ListenSet = false // the default address, taken
	other, err := daemon.Open(context.Background(), daemon.Options{StateDir: t.TempDir(), Config: &fallback, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err, "the default address taken: the daemon runs without its API")
	require.NoError(t, other.Close())

	require.NoError(t, d.Close())
	_, err = http.Get("http://" + addr + "/healthz")
	require.Error(t, err, "closed with the daemon")
}
