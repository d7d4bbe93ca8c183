package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
)

// runPipelineCommand runs `ductile --config CONFIG --state-dir DIR
// pipeline run ARGS…` in this process. Until the pipeline parent command
// is merged, a stand-in parent holds pipelineRunCommand.
func runPipelineCommand(t *testing.T, configPath, stateDir string, args ...string) cmdResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := newApp(&stdout, &stderr)
	if !slices.ContainsFunc(app.Commands, func(c *cli.Command) bool { return c.Name == "pipeline" }) {
		app.Commands = append(app.Commands, &cli.Command{Name: "pipeline", Subcommands: []*cli.Command{pipelineRunCommand()}})
	}
	argv := append([]string{"ductile", "--config", configPath, "--state-dir", stateDir, "pipeline", "run"}, args...)
	err := app.RunContext(context.Background(), normalizeArgs(app, argv))
	code := exitCode(err, &stderr, slices.Contains(args, "--json"))
	return cmdResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// cmdResult is how a command run in this process ended.
type cmdResult struct {
	code           int
	stdout, stderr string
}

func (r cmdResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// pipelineConfig writes a config with an echo plugin (handle) under a
// plugin root and the pipelines given (YAML), and returns its path and a
// state directory.
func pipelineConfig(t *testing.T, pipelines string) (configPath, stateDir string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "plugins")
	plugin := filepath.Join(root, "echo")
	require.NoError(t, os.MkdirAll(plugin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(plugin, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\n"+
		"name: echo\nversion: 0.1.0\nprotocol: 2\nentrypoint: run.sh\ncommands: [{name: handle, type: write}]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(plugin, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null\necho '{\"status\":\"ok\"}'\n"), 0o755))
	configPath = filepath.Join(dir, "config.yaml")
	text := "plugin_roots: [" + root + "]\nplugins:\n  echo: {}\n" + pipelines
	require.NoError(t, os.WriteFile(configPath, []byte(text), 0o600))
	return configPath, filepath.Join(dir, "state")
}

// skipWithoutCompiler skips a test that needs compiled pipelines while
// pipeline.Compile returns an empty set.
func skipWithoutCompiler(t *testing.T, configPath string) {
	t.Helper()
	cfg, err := config.Load(configPath)
	require.NoError(t, err)
	set, err := pipeline.Compile(cfg, nil)
	require.NoError(t, err)
	require.NotEmpty(t, set.Pipelines)
}

// TestPipelineRunRefuses: bad arguments and payloads are usage errors
// (exit 2), an unknown pipeline is not_found naming the known ones; nothing
// is started.
func TestPipelineRunRefuses(t *testing.T) {
	t.Parallel()
	configPath, stateDir := pipelineConfig(t, "")
	for _, args := range [][]string{
		{}, {"a", "b"}, {"fetch", "--timeout", "1s"}, {"fetch", "--wait", "--timeout", "-1s"},
		{"fetch", "--payload", "[1]"}, {"fetch", "--payload", `"x"`}, {"fetch", "--payload", "{"},
	} {
		r := runPipelineCommand(t, configPath, stateDir, args...)
		require.Equal(t, exitUsage, r.code, "%q: %s", args, r)
	}
	r := runPipelineCommand(t, configPath, stateDir, "fetch", "--payload", "[1]")
	require.Contains(t, r.stderr, "--payload must be a JSON object")

	r = runPipelineCommand(t, configPath, stateDir, "nosuch", "--json")
	require.Equal(t, exitFailure, r.code, r.String())
	var out struct {
		Error struct{ Code, Message, Hint string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &out), r.String())
	require.Equal(t, "not_found", out.Error.Code)
	require.Contains(t, out.Error.Message, `no pipeline "nosuch" in `+configPath)
	require.Contains(t, out.Error.Hint, "its pipelines: none")
	_, err := os.Stat(daemon.DBPath(stateDir))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was started")
}

// TestPipelineRunStartsARun: with no daemon, pipeline run records the run
// (it waits in the queue); --dry-run and a --wait that has no daemon to
// wait on start nothing.
func TestPipelineRunStartsARun(t *testing.T) {
	t.Parallel()
	configPath, stateDir := pipelineConfig(t, "pipelines:\n  - name: fetch\n    steps:\n      - uses: echo.handle\n")
	skipWithoutCompiler(t, configPath)

	r := runPipelineCommand(t, configPath, stateDir, "fetch", "--dry-run", "--payload", `{"url":"u"}`)
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "would start a run of pipeline fetch")
	r = runPipelineCommand(t, configPath, stateDir, "fetch", "--wait")
	require.Equal(t, exitFailure, r.code, r.String())
	require.Contains(t, r.stderr, "--wait needs a running daemon")

	r = runPipelineCommand(t, configPath, stateDir, "fetch", "--payload", `{"url":"u"}`, "--json")
	require.Equal(t, 0, r.code, r.String())
	var out pipelineRunOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.String())
	require.Equal(t, events.RunRunning, out.Status)
	require.Zero(t, out.DaemonPID)

	l, err := ledger.Open(context.Background(), daemon.DBPath(stateDir), ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	var runs []events.RunStartedData
	_, err = l.ReadFrom(context.Background(), 0, 0, ledger.Filter{Type: events.PipelineRunStarted}, func(ev ledger.Event) error {
		var d events.RunStartedData
		runs = append(runs, d)
		return json.Unmarshal(ev.Data, &runs[len(runs)-1])
	})
	require.NoError(t, err)
	require.Len(t, runs, 1, "one run: the dry run and the refused --wait started none")
	require.Equal(t, out.RunID, runs[0].RunID)
	require.Equal(t, out.JobID, runs[0].JobID)
	require.Equal(t, events.TriggerCLI, runs[0].Trigger)
}
