package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/views"
)

// TestAPIOffIsReported: when the API's default address is taken, the
// daemon runs without it and says so where an operator looks: on the
// terminal it was started from (Options.Alerts), in /healthz of the
// webhook listener (degraded, with why), and in its report, which system
// status reads.
func TestAPIOffIsReported(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	cfg := config.Default()
	cfg.APIServer = config.DefaultAPIServer()
	cfg.APIServer.Listen = taken.Addr().String() // as the default address, not written: ListenSet false
	hooks := freeAddr(t)
	cfg.WebhookSettings.Listen = hooks
	cfg.WebhookSettings.Endpoints = []config.WebhookEndpoint{{Path: "/hook", Plugin: "echo", Command: "handle", SecretRef: "hook",
		SignatureHeader: "X-Hub-Signature-256", MaxBodySize: 1 << 20}}
	stateDir := t.TempDir()
	alerts, alertsW := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		err := daemon.Run(ctx, daemon.Options{StateDir: stateDir, Config: cfg, Logger: slog.New(slog.DiscardHandler), Alerts: alertsW,
			Secrets: func() auth.Secrets { return nil }})
		alertsW.Close() // a Run that ended without a word ends the read below
		ran <- err
	}()
	line, err := bufio.NewReader(alerts).ReadString('\n') // Run writes it once started
	require.NoError(t, err)
	require.Contains(t, line, "ductile: running WITHOUT the HTTP API: its default address "+taken.Addr().String()+" is not free")
	require.Contains(t, line, "set api.listen to a free address")

	res, err := http.Get("http://" + hooks + "/healthz")
	require.NoError(t, err)
	var health struct {
		Status string         `json:"status"`
		API    views.APIState `json:"api"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&health))
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "degraded", health.Status)
	require.True(t, health.API.Enabled)
	require.Contains(t, health.API.Off, "is not free")

	report, ok, err := daemon.ReadReport(stateDir, os.Getpid())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, health.API, report.API)
	require.False(t, report.Writes.Failing)
	_, ok, err = daemon.ReadReport(stateDir, os.Getpid()+1)
	require.NoError(t, err)
	require.False(t, ok, "another daemon's report is not this one's")

	stop()
	require.NoError(t, <-ran)
	_, err = os.Stat(daemon.ReportPath(stateDir))
	require.ErrorIs(t, err, os.ErrNotExist, "a stopped daemon leaves no report")
}
