package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/commands"
)

// TestEnqueueRefusesAPluginThatCannotRun: a plugin the daemon loaded whose
// files can no longer be run (Options.CanRun) is 503 unavailable with the
// reason, and nothing is enqueued; another command still is. (Not
// parallel: TestZOpenAPIResponsesAreReal, run after the serial tests,
// needs its 503.)
func TestEnqueueRefusesAPluginThatCannotRun(t *testing.T) {
	f := start(t, func(o *api.Options) {
		o.CanRun = func(plugin, command string) error {
			if command == "handle" {
				return &commands.TargetError{Kind: commands.ErrPluginUnrunnable, Plugin: plugin, Reason: "entrypoint run.sh is not executable: chmod +x /p/echo/run.sh"}
			}
			return nil
		}
	})
	r := f.do("POST", "/plugin/echo/handle", "plugin-rw", nil)
	requireError(t, r, http.StatusServiceUnavailable, "unavailable")
	require.Equal(t, `plugin "echo" cannot run now: entrypoint run.sh is not executable: chmod +x /p/echo/run.sh`, r.body["message"])
	require.Contains(t, r.body["hint"], "nothing was enqueued")
	r = f.do("POST", "/plugin/echo/poll", "plugin-rw", nil)
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
}
