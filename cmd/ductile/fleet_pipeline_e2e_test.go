package main_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// fleetPipelineConfig is a daemon whose pipeline art has a middle step of
// plugin paint, placed runs_on: remote and not installed on the daemon's
// machine; ocr is placed remote too, and no worker serves it.
const fleetPipelineConfig = `
api: {listen: 127.0.0.1:0}
plugin_roots: ["$ROOT"]
plugins:
  paint: {runs_on: remote}
  ocr: {runs_on: remote}
pipelines:
  - name: art
    steps:
      - {id: s1, uses: e1, baggage: {web.url: payload.url}}
      - {id: s2, uses: paint, baggage: {web.lang: payload.lang}}
      - {id: s3, uses: c, baggage: {from: payload.metadata, namespace: paint}}
`

// remotePluginsOutput is config check's and system status's remote_plugins.
type remotePluginsOutput struct {
	Warnings      []string `json:"warnings"`
	RemotePlugins []struct {
		Plugin  string `json:"plugin"`
		RunsOn  string `json:"runs_on"`
		Workers []struct {
			Name       string `json:"name"`
			Host       string `json:"host"`
			LastSeen   string `json:"last_seen"`
			Claims     int    `json:"claims"`
			LiveClaims int    `json:"live_claims"`
			Live       bool   `json:"live"`
		} `json:"workers"`
	} `json:"remote_plugins"`
}

// TestAPipelineStepRunsOnARemoteWorker: the daemon starts with a pipeline
// whose middle step's plugin only a worker has; a worker whose token is
// limited to that plugin (worker:plugin=paint) registers it; config check
// and system status say which worker serves paint and warn that none
// serves ocr, naming the command to run; the pipeline's run goes local →
// worker → local as an all-local one does (each step entered with the
// previous one's event, baggage accumulating, the run succeeded), and the
// remote step's run record and run get name the worker. A worker of the
// limited token serving another plugin too, and one of another token
// under box-a's name, are refused and exit 1 saying what to do.
func TestAPipelineStepRunsOnARemoteWorker(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, []stepPlugin{
		{name: "e1", response: emits("e1.done", `{"lang":"en"}`)},
		{name: "c"},
	}, fleetPipelineConfig)
	admin := lastLine(mustRun(t, nil, w.args("config", "token", "create", "admin", "--scopes", "*")...).stdout)
	workerKey := lastLine(mustRun(t, nil, w.args("config", "token", "create", "painter", "--scopes", "worker:plugin=paint")...).stdout)
	d := w.startDaemon()
	line, _ := d.waitLine(t, 0, messageIs("api: listening"))
	var listening struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &listening))
	base := "http://" + listening.Addr
	require.NotEmpty(t, admin)

	// Before any worker: the pipeline runs (compiled), and check warns
	// that nothing serves either remote plugin.
	var check remotePluginsOutput
	w.runJSON(0, &check, "config", "check", "--json")
	require.Len(t, check.RemotePlugins, 2)
	require.Empty(t, check.RemotePlugins[1].Workers)
	requireWarning(t, check.Warnings, "plugins.paint: runs_on: remote, but no registered worker serves it", "ductile worker --api http://127.0.0.1:0 --plugin paint")
	var pipelines struct {
		Pipelines []struct{ Name string } `json:"pipelines"`
	}
	w.runJSON(0, &pipelines, "pipeline", "list", "--json")
	require.Len(t, pipelines.Pipelines, 1)

	// The worker, on "another machine": its own plugin root and state.
	home := t.TempDir()
	writeStepPlugin(t, filepath.Join(home, "plugins"), w.scratch, stepPlugin{name: "paint",
		response: emits("paint.done", `{"metadata":{"style":"ink"}}`)})
	worker := start(t, cleanEnv(t, "XDG_STATE_HOME="+filepath.Join(home, "state"), "DUCTILE_WORKER_TOKEN="+workerKey),
		"--log-format", "json", "worker", "--api", base, "--plugins", filepath.Join(home, "plugins"), "--name", "box-a")
	waitFor(t, 20*time.Second, "worker box-a registered", func() bool {
		var c remotePluginsOutput
		r := w.run("config", "check", "--json")
		return json.Unmarshal([]byte(r.stdout), &c) == nil && len(c.RemotePlugins) == 2 && len(c.RemotePlugins[1].Workers) == 1
	})
	mustRun(t, nil, w.args("system", "reload")...) // compiles against the registration now

	for _, args := range [][]string{{"config", "check", "--json"}, {"system", "status", "--no-health", "--json"}} {
		var out remotePluginsOutput
		w.runJSON(0, &out, args...)
		require.Len(t, out.RemotePlugins, 2, "%v", args)
		ocr, paint := out.RemotePlugins[0], out.RemotePlugins[1]
		require.Equal(t, "ocr", ocr.Plugin)
		require.Empty(t, ocr.Workers)
		require.Equal(t, "paint", paint.Plugin)
		require.Equal(t, "remote", paint.RunsOn)
		require.Len(t, paint.Workers, 1)
		require.Equal(t, "box-a", paint.Workers[0].Name)
		require.NotEmpty(t, paint.Workers[0].LastSeen)
		requireWarning(t, out.Warnings, "plugins.ocr: runs_on: remote, but no registered worker serves it", "--plugin ocr")
		for _, warning := range out.Warnings {
			require.NotContains(t, warning, "plugins.paint", "%v", args)
		}
	}
	text := w.run("system", "status", "--no-health")
	require.Contains(t, text.stdout, "remote    paint (runs_on: remote): served by box-a on ")
	require.Contains(t, text.stdout, "remote    ocr (runs_on: remote): served by no registered worker")

	out := w.runPipeline("art", `{"url":"https://example.org/v"}`, 0)
	require.Equal(t, events.RunSucceeded, out.Status, "%+v", out)
	l := openLedger(t, w.state)
	runs, _ := w.facts(l)
	r := runs[out.RunID]
	require.Equal(t, []string{"s1", "s2", "s3"}, r.nodes())
	s1, s2, s3 := r.node(t, "s1"), r.node(t, "s2"), r.node(t, "s3")
	requireInOrder(t, s1, s2, s3)
	requireEvent(t, w.mustRequest(s2.ID), "e1.done", `{"lang":"en"}`)
	requireEvent(t, w.mustRequest(s3.ID), "paint.done", `{"metadata":{"style":"ink"}}`)
	require.JSONEq(t, `{"web":{"url":"https://example.org/v","lang":"en"}}`, string(w.mustRequest(s2.ID).Context),
		"the worker's plugin receives the run's baggage")
	require.JSONEq(t, `{"web":{"url":"https://example.org/v","lang":"en"},"paint":{"style":"ink"}}`, string(w.mustRequest(s3.ID).Context),
		"the step after the remote one holds its claim too")
	require.Equal(t, 1, s2.Count[events.JobStarted])
	require.Equal(t, 1, s2.Count[events.JobSucceeded])
	require.Equal(t, 1, r.FinishedCount)

	// The remote step's attempt names its worker; the local ones the daemon.
	var rec struct {
		Attempts []struct {
			Worker *struct {
				Name string `json:"name"`
				PID  int    `json:"pid"`
			} `json:"worker"`
		} `json:"attempts"`
	}
	w.runJSON(0, &rec, "run", "get", s2.ID, "--json")
	require.Len(t, rec.Attempts, 1)
	require.Equal(t, "box-a", rec.Attempts[0].Worker.Name)
	require.Equal(t, worker.pid(), rec.Attempts[0].Worker.PID)
	require.Contains(t, w.run("run", "get", s2.ID).stdout, "on box-a (pid ")
	w.runJSON(0, &rec, "run", "get", s1.ID, "--json")
	require.True(t, strings.HasSuffix(rec.Attempts[0].Worker.Name, "/local"), rec.Attempts[0].Worker.Name)
	mustRun(t, nil, w.args("ledger", "verify")...)

	// The painter token may not register another plugin; another token
	// may not take box-a's name. Each worker exits 1 with the fix.
	writeStepPlugin(t, filepath.Join(home, "more"), w.scratch, stepPlugin{name: "sketch"})
	other := lastLine(mustRun(t, nil, w.args("config", "token", "create", "other", "--scopes", "worker")...).stdout)
	mustRun(t, nil, w.args("system", "reload")...)
	runWorker := func(key, name string) result {
		return ductile(t, cleanEnv(t, "XDG_STATE_HOME="+filepath.Join(t.TempDir(), "state"), "DUCTILE_WORKER_TOKEN="+key),
			"worker", "--api", base, "--plugins", filepath.Join(home, "plugins"), "--plugins", filepath.Join(home, "more"), "--name", name, "--once")
	}
	r1 := runWorker(workerKey, "box-b")
	require.Equal(t, 1, r1.code, "%s", r1)
	require.Contains(t, r1.stderr, "plugin_not_permitted")
	require.Contains(t, r1.stderr, `token "painter" may serve only paint as a worker, not plugin "sketch"`)
	require.Contains(t, r1.stderr, "--scopes worker:plugin=sketch")
	r2 := runWorker(other, "box-a")
	require.Equal(t, 1, r2.code, "%s", r2)
	require.Contains(t, r2.stderr, "worker_name_taken")
	require.Contains(t, r2.stderr, "ductile worker --name NAME")
}

// requireWarning requires a warning holding every part.
func requireWarning(t *testing.T, warnings []string, parts ...string) {
	t.Helper()
	for _, w := range warnings {
		found := true
		for _, p := range parts {
			found = found && strings.Contains(w, p)
		}
		if found {
			return
		}
	}
	t.Fatalf("no warning holds %q; warnings:\n%s", parts, strings.Join(warnings, "\n"))
}
