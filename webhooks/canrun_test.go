package webhooks_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeliveryForAPluginThatCannotRunIsRefused: a signed delivery whose
// plugin cannot run now (Options.CanRun) is 503 unavailable, with
// no detail for the sender, and enqueues nothing; once it can, the same
// delivery is accepted. An unsigned one is still a bare 403: the plugin's
// state is told only to a sender that holds the secret.
func TestDeliveryForAPluginThatCannotRunIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cannotRun = errors.New(`plugin "echo" cannot run now: entrypoint run.sh is not executable: chmod +x /srv/plugins/echo/run.sh`)
	body := `{"n":1}`
	code, out := b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": sig(body)})
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	require.Equal(t, map[string]any{"code": "unavailable", "message": "this endpoint's plugin cannot run now: nothing was enqueued",
		"hint": "deliver it again later; the daemon's log says why"}, out)
	code, out = b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": "sha256=00"})
	require.Equal(t, http.StatusForbidden, code, "%v", out)
	require.Empty(t, b.jobs(t))

	b.cannotRun = nil
	code, out = b.post(t, http.MethodPost, "/hook", []byte(body), map[string]string{"X-Hub-Signature-256": sig(body)})
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Len(t, b.jobs(t), 1)
}
