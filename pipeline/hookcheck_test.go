package pipeline_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pipeline"
)

// TestHookWarnings: an on-hook pipeline is reported when no enabled plugin
// has notify_on_complete (it could never run), and not otherwise.
func TestHookWarnings(t *testing.T) {
	t.Parallel()
	const pipelines = `
pipelines:
  - name: alert
    on-hook: job.failed
    steps: [{uses: sink}]
  - name: plain
    on: echo.done
    steps: [{uses: sink}]
`
	for _, tc := range []struct {
		name, plugins string
		warned        bool
	}{
		{"none configured", "", true},
		{"none notifies", "plugins: {echo: {}}\n", true},
		{"only a disabled one notifies", "plugins: {echo: {enabled: false, notify_on_complete: true}}\n", true},
		{"one notifies", "plugins: {echo: {notify_on_complete: true}, sink: {}}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := load(t, tc.plugins+pipelines)
			set, err := pipeline.Compile(cfg, installed)
			require.NoError(t, err)
			warnings := pipeline.HookWarnings(cfg, set)
			if !tc.warned {
				require.Empty(t, warnings)
				return
			}
			require.Len(t, warnings, 1)
			require.Equal(t, "pipelines[alert].on-hook", warnings[0].Path)
			require.Contains(t, warnings[0].Error(), "config.yaml:")
			require.Contains(t, warnings[0].Msg, "notify_on_complete: true")
		})
	}
}
