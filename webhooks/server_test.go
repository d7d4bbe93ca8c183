package webhooks_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/webhooks"
)

// TestServerServesAndCloses: a delivery over a real socket is accepted,
// and Close leaves no goroutine behind (goleak in TestMain).
func TestServerServesAndCloses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, err := webhooks.Listen("127.0.0.1:0", b.handler, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	body := `{"over":"tcp"}`
	req, err := http.NewRequest(http.MethodPost, "http://"+s.Addr()+"/hook", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Hub-Signature-256", sig(body))
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	client.CloseIdleConnections()
	require.NoError(t, s.Close())
	_, err = http.Get("http://" + s.Addr() + "/healthz")
	require.Error(t, err, "closed")
	require.Len(t, b.jobs(t), 1)
}
