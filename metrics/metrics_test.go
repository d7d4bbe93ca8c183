package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/metrics"
	"github.com/ductile/ductile/projections"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script succeeds unless its payload says fail.
const script = `#!/bin/sh
req=$(cat)
case "$req" in *'"fail":true'*) printf '%s\n' '{"status":"error","error":"asked to fail","retry":false}'; exit 0;; esac
printf '%s\n' '{"status":"ok","result":"fine"}'
`

// writePlugin writes a shell plugin name under root whose entrypoint has
// the given first line (#!/bin/sh, or an interpreter that does not exist).
func writePlugin(t testing.TB, root, name, shebang string) {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + name +
		"\nversion: 1.0.0\nprotocol: 2\nentrypoint: run.sh\ncommands: [poll]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	body := shebang + script[len("#!/bin/sh"):]
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(body), 0o755))
}

// openDaemon opens a daemon on a fresh state directory with plugins ok
// (a shell plugin) and broken (whose interpreter does not exist).
func openDaemon(t testing.TB, workers int) *daemon.Daemon {
	t.Helper()
	root := t.TempDir()
	writePlugin(t, root, "ok", "#!/bin/sh")
	writePlugin(t, root, "broken", "#!/nonexistent/interpreter")
	cfg := config.Default()
	cfg.PluginRoots = []string{root}
	for _, name := range []string{"ok", "broken"} {
		pc := config.DefaultPlugin()
		pc.Retry.MaxAttempts = 1
		cfg.Plugins[name] = pc
	}
	d, err := daemon.Open(context.Background(), daemon.Options{StateDir: filepath.Join(t.TempDir(), "state"), Config: cfg,
		MaxWorkers: workers, Grace: 100 * time.Millisecond, Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.NoError(t, err)
	return d
}

func enqueue(t testing.TB, d *daemon.Daemon, plugin, payload string) string {
	cmd := commands.JobFor(d.Config(), plugin, "poll", events.ActorCLI)
	if payload != "" {
		cmd.Payload = []byte(payload)
	}
	res, err := commands.EnqueueJob(context.Background(), d.Ledger, cmd)
	require.NoError(t, err)
	return res.JobID
}

// scrape gets /metrics through the handler on a real server and parses it.
func scrape(t testing.TB, h http.Handler) map[string]*dto.MetricFamily {
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// value is the value of the family's metric with these labels (a gauge,
// a counter, or a histogram's count), and whether there is one.
func value(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match != len(labels) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func requireValue(t *testing.T, families map[string]*dto.MetricFamily, want float64, name string, labels map[string]string) {
	t.Helper()
	got, ok := value(families, name, labels)
	require.True(t, ok, "%s%v is missing", name, labels)
	require.Equal(t, want, got, "%s%v", name, labels)
}

// TestScrapeAfterRealJobs runs jobs through a daemon (succeeded, failed
// dead, a plugin whose process cannot spawn, a job left queued and one
// canceled), scrapes /metrics and checks the families and their values.
func TestScrapeAfterRealJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openDaemon(t, 2)
	defer func() { require.NoError(t, d.Close()) }()
	require.NotNil(t, d.Metrics)

	for range 3 {
		enqueue(t, d, "ok", "")
	}
	enqueue(t, d, "ok", `{"fail":true}`)
	enqueue(t, d, "broken", "")
	succeeded := d.Projector.Reached(ctx, events.JobSucceeded, 3)
	dead := d.Projector.Reached(ctx, events.JobDead, 2)
	for _, ch := range []<-chan struct{}{succeeded, dead} {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatal("the jobs did not end")
		}
	}
	head, err := d.Ledger.LastSeq(ctx)
	require.NoError(t, err)
	require.NoError(t, d.Projector.WaitFor(ctx, head))

	f := scrape(t, d.Metrics.Handler())
	for _, name := range []string{"ductile_jobs", "ductile_jobs_finished_total", "ductile_queue_depth", "ductile_attempt_duration_seconds", "ductile_spawn_failures_total",
		"ductile_projector_lag_events", "ductile_ledger_head_seq", "ductile_ledger_bytes", "ductile_ledger_commits_total",
		"ductile_ledger_fsyncs_total", "go_goroutines", "process_cpu_seconds_total"} {
		require.Contains(t, f, name)
	}
	requireValue(t, f, 3, "ductile_attempt_duration_seconds", map[string]string{"plugin": "ok", "command": "poll", "outcome": "ok"})
	requireValue(t, f, 1, "ductile_attempt_duration_seconds", map[string]string{"plugin": "ok", "command": "poll", "outcome": "error"})
	requireValue(t, f, 1, "ductile_attempt_duration_seconds", map[string]string{"plugin": "broken", "command": "poll", "outcome": "error"})
	requireValue(t, f, 1, "ductile_spawn_failures_total", map[string]string{"plugin": "broken"})
	_, ok := value(f, "ductile_spawn_failures_total", map[string]string{"plugin": "ok"})
	require.False(t, ok, "a plugin that spawned has no spawn failure")
	requireValue(t, f, 1, "ductile_jobs", map[string]string{"plugin": "ok", "status": "dead"})
	requireValue(t, f, 1, "ductile_jobs", map[string]string{"plugin": "broken", "status": "dead"})
	_, ok = value(f, "ductile_jobs", map[string]string{"plugin": "ok", "status": "succeeded"})
	require.False(t, ok, "succeeded jobs are not counted (no index holds them)")
	require.Equal(t, dto.MetricType_COUNTER, f["ductile_jobs_finished_total"].GetType())
	requireValue(t, f, 3, "ductile_jobs_finished_total", map[string]string{"plugin": "ok", "status": "succeeded"})
	requireValue(t, f, 1, "ductile_jobs_finished_total", map[string]string{"plugin": "ok", "status": "dead"})
	requireValue(t, f, 1, "ductile_jobs_finished_total", map[string]string{"plugin": "broken", "status": "dead"})
	_, ok = value(f, "ductile_jobs_finished_total", map[string]string{"plugin": "broken", "status": "succeeded"})
	require.False(t, ok, "no broken job succeeded")
	for _, status := range []string{"queued", "running", "cancel_requested"} {
		requireValue(t, f, 0, "ductile_queue_depth", map[string]string{"status": status})
	}
	requireValue(t, f, 0, "ductile_projector_lag_events", nil)
	requireValue(t, f, float64(head), "ductile_ledger_head_seq", nil)
	db, ok := value(f, "ductile_ledger_bytes", map[string]string{"file": "database"})
	require.True(t, ok)
	require.Positive(t, db)
	wal, ok := value(f, "ductile_ledger_bytes", map[string]string{"file": "wal"})
	require.True(t, ok)
	require.Positive(t, wal)
	commits, ok := value(f, "ductile_ledger_commits_total", nil)
	require.True(t, ok)
	require.Equal(t, float64(d.Ledger.WriteStats().Commits), commits)
	require.Positive(t, commits)

}

// TestQueuedAndCanceledJobsAreCounted: on a ledger no dispatcher runs,
// queued jobs count in the queue's depth and by plugin, a canceled one by
// plugin, and the projector's lag before a catch-up is what it has not
// applied.
func TestQueuedAndCanceledJobsAreCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	var ids []string
	for _, plugin := range []string{"alpha", "alpha", "beta"} {
		res, err := commands.EnqueueJob(ctx, l, commands.JobFor(config.Default(), plugin, "poll", events.ActorCLI))
		require.NoError(t, err)
		ids = append(ids, res.JobID)
	}
	_, err = commands.CancelJob(ctx, l, commands.Cancel{JobID: ids[2], Reason: "test", Actor: events.ActorCLI, Now: time.Now()})
	require.NoError(t, err)
	p := projections.New(l, projections.Options{})
	m := metrics.New(metrics.Options{Ledger: l, Projector: p})

	head, err := l.LastSeq(ctx)
	require.NoError(t, err)
	f := scrape(t, m.Handler())
	requireValue(t, f, float64(head), "ductile_projector_lag_events", nil)
	requireValue(t, f, 0, "ductile_queue_depth", map[string]string{"status": "queued"})

	_, err = p.CatchUp(ctx)
	require.NoError(t, err)
	f = scrape(t, m.Handler())
	requireValue(t, f, 0, "ductile_projector_lag_events", nil)
	requireValue(t, f, 2, "ductile_queue_depth", map[string]string{"status": "queued"})
	requireValue(t, f, 2, "ductile_jobs", map[string]string{"plugin": "alpha", "status": "queued"})
	requireValue(t, f, 1, "ductile_jobs", map[string]string{"plugin": "beta", "status": "canceled"})
	requireValue(t, f, 1, "ductile_jobs_finished_total", map[string]string{"plugin": "beta", "status": "canceled"})
	_, ok := value(f, "ductile_jobs_finished_total", map[string]string{"plugin": "alpha"})
	require.False(t, ok, "queued jobs have not finished")
	requireValue(t, f, 0, "ductile_queue_depth", map[string]string{"status": "running"})
	_, ok = value(f, "ductile_attempt_duration_seconds", nil)
	require.False(t, ok, "no attempt ended: a histogram vector without observations has no series")
}
