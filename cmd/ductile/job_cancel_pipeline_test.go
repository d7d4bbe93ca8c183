package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// runCLI runs `ductile --config CONFIG --state-dir DIR ARGS…` in this process.
func runCLI(t *testing.T, configPath, stateDir string, args ...string) cmdResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := newApp(&stdout, &stderr)
	argv := append([]string{"ductile", "--config", configPath, "--state-dir", stateDir}, args...)
	err := app.RunContext(context.Background(), normalizeArgs(app, argv))
	code := exitCode(err, &stderr, slices.Contains(args, "--json"))
	return cmdResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// TestJobCancelJoinUsesTheConfig: a CLI cancel that ends a split's last
// branch enqueues the join with the plugin's configured retry, not the
// default config's.
func TestJobCancelJoinUsesTheConfig(t *testing.T) {
	t.Parallel()
	configPath, stateDir := pipelineConfig(t, "pipelines:\n  - name: fan\n    steps:\n"+
		"      - split: [{uses: echo.handle}, {uses: echo.handle}]\n        continue_on_error: true\n"+
		"      - uses: echo.handle\n")
	text, err := os.ReadFile(configPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(configPath, []byte(strings.Replace(string(text), "echo: {}", "echo: {retry: {max_attempts: 7}}", 1)), 0o600))
	skipWithoutCompiler(t, configPath)

	r := runCLI(t, configPath, stateDir, "pipeline", "run", "fan", "--json")
	require.Equal(t, 0, r.code, r.String())
	var run pipelineRunOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run))

	enqueued := func() map[string]events.Enqueued {
		l, err := ledger.Open(context.Background(), daemon.DBPath(stateDir), ledger.Options{ReadOnly: true})
		require.NoError(t, err)
		defer l.Close()
		out := map[string]events.Enqueued{}
		_, err = l.ReadFrom(context.Background(), 0, 0, ledger.Filter{Type: events.JobEnqueued}, func(ev ledger.Event) error {
			var d events.Enqueued
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return err
			}
			out[events.JobIDFromStream(ev.Stream)] = d
			return nil
		})
		require.NoError(t, err)
		return out
	}
	branches := enqueued()
	require.Len(t, branches, 2)
	for id, d := range branches {
		require.Equal(t, 7, d.MaxAttempts, id)
		r := runCLI(t, configPath, stateDir, "job", "cancel", id)
		require.Equal(t, 0, r.code, r.String())
	}
	all := enqueued()
	require.Len(t, all, 3, "the join is enqueued")
	for id, d := range all {
		if _, ok := branches[id]; !ok {
			require.Equal(t, run.RunID, d.Pipeline.Run)
			require.Equal(t, 7, d.MaxAttempts, "the join is built with the config's retry")
		}
	}
}
