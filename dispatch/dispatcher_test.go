package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/plugins"
	"github.com/ductile/ductile/queries"
)

// pluginRoot holds the test plugins, written once before any test runs (a
// script written while other tests fork can fail with "text file busy").
var pluginRoot string

// gate blocks until a line is written to the FIFO named by the job's
// payload ("fifo"), then succeeds: a plugin the test releases at will,
// without sleeping.
const gateScript = `#!/bin/sh
req=$(cat)
fifo=$(printf '%s' "$req" | sed -n 's/.*"fifo":"\([^"]*\)".*/\1/p')
read line < "$fifo"
printf '{"status":"ok","result":"released %s"}\n' "$line"
`

func manifest(name string, safe bool) string {
	return fmt.Sprintf(`manifest_spec: ductile.plugin
manifest_version: 1
name: %s
version: 1.0.0
protocol: 2
entrypoint: run.sh
concurrency_safe: %v
commands:
  poll: {type: read}
`, name, safe)
}

func TestMain(m *testing.M) {
	// Reap orphaned plugin processes here, so tests can prove they are gone.
	if err := becomeSubreaper(); err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "dispatch-plugins-")
	if err != nil {
		panic(err)
	}
	pluginRoot = dir
	for _, p := range []struct {
		name   string
		safe   bool
		script string
	}{
		{"gate", true, gateScript}, {"solo", false, gateScript}, {"other", true, gateScript},
		// Executable, so discovery accepts it, but its interpreter is missing.
		{"broken", true, "#!/nonexistent/interpreter\n"},
		{"failing", true, "#!/bin/sh\ncat >/dev/null\necho '{\"status\":\"error\",\"error\":\"nope\"}'\n"},
		{"quick", true, "#!/bin/sh\ncat >/dev/null\necho '{\"status\":\"ok\",\"result\":\"quick\"}'\n"},
		{"flood", true, floodScript},
		{"chatty", true, "#!/bin/sh\ncat >/dev/null\necho 'an ordinary line' >&2\necho '{\"status\":\"ok\"}'\n"},
		{"counter", false, counterScript}, {"slowcounter", false, slowCounterScript},
		{"stopper", true, stopperScript}, {"reporter", true, reporterScript}, {"progressflood", true, progressFloodScript},
	} {
		d := filepath.Join(dir, p.name)
		must(os.MkdirAll(d, 0o755))
		must(os.WriteFile(filepath.Join(d, "manifest.yaml"), []byte(manifest(p.name, p.safe)), 0o644))
		must(os.WriteFile(filepath.Join(d, "run.sh"), []byte(p.script), 0o755))
	}
	// The bundled plugins, SDKs and examples (the examples' root: examplesRoot).
	must(plugins.Unpack(filepath.Join(dir, ".bundled")))
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// floodScript writes 1 MB to stderr and 11 MiB to stdout, over its cap:
// each attempt fails (a protocol error), and is retried.
const floodScript = `#!/bin/sh
cat >/dev/null
head -c 1000000 /dev/zero | tr '\0' e >&2
head -c 11534336 /dev/zero | tr '\0' o
`

// counterScript counts its runs in its state: it answers state_updates
// {"n": n+1}, n being what its request's state holds (0 at first).
const counterScript = `#!/bin/sh
req=$(cat)
n=$(printf '%s' "$req" | sed -n 's/.*"state":{"n":\([0-9]*\)}.*/\1/p')
printf '{"status":"ok","state_updates":{"n":%d}}\n' $(( ${n:-0} + 1 ))
`

// slowCounterScript counts like counterScript, after waiting on the FIFO its
// payload names, if any; it emits 200 events, so that routing them makes
// its completion take a while.
const slowCounterScript = `#!/bin/sh
req=$(cat)
fifo=$(printf '%s' "$req" | sed -n 's/.*"fifo":"\([^"]*\)".*/\1/p')
[ -n "$fifo" ] && read line < "$fifo"
n=$(printf '%s' "$req" | sed -n 's/.*"state":{"n":\([0-9]*\)}.*/\1/p')
printf '{"status":"ok","state_updates":{"n":%d},"events":[' $(( ${n:-0} + 1 ))
i=0
while [ $i -lt 200 ]; do
  [ $i -gt 0 ] && printf ','
  printf '{"type":"tick","payload":{"i":%d}}' $i
  i=$((i+1))
done
printf ']}\n'
`

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// drainTimeout is the daemon's DrainTimeout in these tests.
const drainTimeout = 300 * time.Millisecond

type testBundle struct {
	t   *testing.T
	ctx context.Context
	d   *daemon.Daemon // nil from setupCore
	c   *daemon.Core   // d's, or from setupCore
	dir string
}

// testDeadline bounds a whole test: a guard against a hang, generous
// because a test of several rounds of real plugin processes under the race
// detector on a busy 2-core machine takes tens of seconds.
const testDeadline = 2 * time.Minute

func setup(t *testing.T, maxWorkers int, tune func(cfg *config.Config)) *testBundle {
	return setupWith(t, maxWorkers, tune, daemon.Options{})
}

// setupWith opens a daemon with opts (Logger, Ledger) on top of the test
// defaults.
func setupWith(t *testing.T, maxWorkers int, tune func(cfg *config.Config), opts daemon.Options) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	t.Cleanup(cancel)
	cfg := testConfig(maxWorkers, tune)
	dir := t.TempDir()
	opts.StateDir, opts.Config, opts.DrainTimeout = dir, cfg, drainTimeout
	if opts.Grace == 0 {
		opts.Grace = 200 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Ledger.Synchronous == "" {
		opts.Ledger.Synchronous = "NORMAL"
	}
	d, err := daemon.Open(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return &testBundle{t: t, ctx: ctx, d: d, c: d.Core, dir: dir}
}

// setupCore opens a Core alone with the test defaults: no dispatcher, so a
// job runs only when RunJob runs it (plugin run without a daemon).
func setupCore(t *testing.T, tune func(cfg *config.Config), log *slog.Logger) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	t.Cleanup(cancel)
	dir := t.TempDir()
	c, err := daemon.OpenCore(ctx, daemon.CoreOptions{StateDir: dir, Config: testConfig(1, tune), Logger: log,
		Ledger: ledger.Options{Synchronous: "NORMAL"}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return &testBundle{t: t, ctx: ctx, c: c, dir: dir}
}

// testConfig is the tests' config: their plugins, maxWorkers workers,
// tuned by tune.
func testConfig(maxWorkers int, tune func(cfg *config.Config)) *config.Config {
	cfg := config.Default()
	cfg.PluginRoots = []string{pluginRoot}
	cfg.Service.MaxWorkers = maxWorkers
	if tune != nil {
		tune(cfg)
	}
	return cfg
}

// gated enqueues a job whose plugin waits on a fresh FIFO; release lets it finish.
func (b *testBundle) gated(plugin, dedupeKey string) (id string, release func()) {
	b.t.Helper()
	fifo := filepath.Join(b.dir, fmt.Sprintf("fifo-%d", time.Now().UnixNano()))
	require.NoError(b.t, syscall.Mkfifo(fifo, 0o600))
	payload, _ := json.Marshal(map[string]string{"fifo": fifo})
	enq := commands.JobFor(b.d.Config(), plugin, "poll", events.ActorCLI)
	enq.Payload, enq.DedupeKey = payload, dedupeKey
	res, err := commands.EnqueueJob(b.ctx, b.d.Ledger, enq)
	require.NoError(b.t, err)
	return res.JobID, func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the plugin opens it
		require.NoError(b.t, err)
		_, err = f.WriteString("go\n")
		require.NoError(b.t, err)
		require.NoError(b.t, f.Close())
	}
}

// statuses reads job statuses from the projection.
func (b *testBundle) statuses(ids ...string) []string {
	b.t.Helper()
	out := make([]string, len(ids))
	err := b.d.Ledger.Read(b.ctx, func(conn *sqlite.Conn) error {
		for i, id := range ids {
			if err := queries.GetJob(conn, id, func(r queries.GetJobRow) error { out[i] = r.Status; return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(b.t, err)
	return out
}

// waitFor blocks, on projector progress, until every job has its status.
func (b *testBundle) waitFor(want map[string]string) {
	b.t.Helper()
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	for {
		progressed := b.d.Projector.Progressed()
		got := b.statuses(ids...)
		ok := true
		for i, id := range ids {
			ok = ok && got[i] == want[id]
		}
		if ok {
			return
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("waiting for %v: have %v for %v", want, got, ids)
		case <-progressed:
		}
	}
}

func (b *testBundle) startOrder(ids ...string) []int64 {
	seqs := make([]int64, len(ids))
	err := b.d.Ledger.Read(b.ctx, func(conn *sqlite.Conn) error {
		for i, id := range ids {
			err := queries.ListJobAttempts(conn, id, func(r queries.ListJobAttemptsRow) error { seqs[i] = r.StartedSeq; return nil })
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(b.t, err)
	return seqs
}

func TestSmartDequeueRunsOtherPluginsPastACappedOne(t *testing.T) {
	b := setup(t, 2, func(cfg *config.Config) {
		pc := config.DefaultPlugin()
		pc.Parallelism = 1
		cfg.Plugins = map[string]config.PluginConfig{"gate": pc}
	})
	// Given three jobs of a plugin capped at 1, queued before one of another plugin,
	g1, rel1 := b.gated("gate", "")
	g2, rel2 := b.gated("gate", "")
	g3, rel3 := b.gated("gate", "")
	o1, relO := b.gated("other", "")

	// the other plugin's job runs beside the first capped one, ahead of
	// the capped plugin's queue (FIFO only among what may run).
	b.waitFor(map[string]string{g1: "running", o1: "running"})
	require.Equal(t, []string{"queued", "queued"}, b.statuses(g2, g3))
	relO()
	b.waitFor(map[string]string{o1: "succeeded"})
	require.Equal(t, []string{"running", "queued", "queued"}, b.statuses(g1, g2, g3))

	// Released one by one, the capped jobs run in FIFO order, one at a time.
	rel1()
	b.waitFor(map[string]string{g1: "succeeded", g2: "running"})
	require.Equal(t, []string{"queued"}, b.statuses(g3))
	rel2()
	rel3()
	b.waitFor(map[string]string{g2: "succeeded", g3: "succeeded"})
	order := b.startOrder(g1, g2, g3)
	require.Less(t, order[0], order[1])
	require.Less(t, order[1], order[2])
}

func TestNotConcurrencySafePluginRunsOneAtATime(t *testing.T) {
	b := setup(t, 3, nil)
	s1, rel1 := b.gated("solo", "")
	s2, rel2 := b.gated("solo", "")
	// A job queued after s2 running proves the dispatcher looked at s2
	// first (FIFO), with a worker free for it.
	o1, relO := b.gated("other", "")
	b.waitFor(map[string]string{s1: "running", o1: "running"})
	require.Equal(t, []string{"queued"}, b.statuses(s2), "manifest concurrency_safe: false caps it at 1")
	relO()
	rel1()
	b.waitFor(map[string]string{s1: "succeeded", s2: "running", o1: "succeeded"})
	rel2()
	b.waitFor(map[string]string{s2: "succeeded"})
}

func TestSameDedupeKeyAndTargetDoNotRunTogether(t *testing.T) {
	b := setup(t, 3, nil)
	k1, rel1 := b.gated("gate", "same")
	k2, rel2 := b.gated("gate", "same")  // no TTL override: enqueued, but not run beside k1
	x1, relX := b.gated("other", "same") // another target with the key runs freely
	b.waitFor(map[string]string{k1: "running", x1: "running"})
	require.Equal(t, []string{"queued"}, b.statuses(k2))
	relX()
	rel1()
	b.waitFor(map[string]string{k1: "succeeded", k2: "running", x1: "succeeded"})
	rel2()
	b.waitFor(map[string]string{k2: "succeeded"})
}

// TestHeldBackJobStartsWhenItsKeyIsFree: the job a same-key job held back
// starts once that one's process exits, with no other job running or
// arriving: the slot is handed to it (the key counts only while a process
// runs), or the loop, woken by that exit or by the outcome's commit, starts it.
func TestHeldBackJobStartsWhenItsKeyIsFree(t *testing.T) {
	b := setup(t, 2, nil)
	k1, rel1 := b.gated("gate", "same")
	k2, rel2 := b.gated("gate", "same")
	b.waitFor(map[string]string{k1: "running"})
	require.Equal(t, []string{"queued"}, b.statuses(k2))
	rel1()
	b.waitFor(map[string]string{k1: "succeeded", k2: "running"})
	rel2()
	b.waitFor(map[string]string{k2: "succeeded"})
}

func TestCancelStopsARunningJob(t *testing.T) {
	b := setup(t, 2, nil)
	id, _ := b.gated("gate", "") // never released
	b.waitFor(map[string]string{id: "running"})
	status, err := commands.CancelJob(b.ctx, b.d.Ledger, commands.Cancel{JobID: id, Reason: "test", Now: time.Now()})
	require.NoError(t, err)
	require.Equal(t, events.StatusCancelRequested, status)
	b.waitFor(map[string]string{id: "canceled"})
}

func TestStopInterruptsJobsAfterTheDrainTimeout(t *testing.T) {
	b := setup(t, 2, nil)
	id, _ := b.gated("gate", "") // never released
	b.waitFor(map[string]string{id: "running"})
	// Closing the daemon drains for DrainTimeout, then interrupts what still runs.
	start := time.Now()
	require.NoError(t, b.d.Close())
	require.GreaterOrEqual(t, time.Since(start), drainTimeout, "the running job had DrainTimeout to finish")
	l, err := ledger.Open(context.Background(), daemon.DBPath(b.dir), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	evs, err := l.ReadStream(context.Background(), "job/"+id)
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, j.Status, "an interrupted attempt is retried later")
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, "job.retry_scheduled", evs[len(evs)-1].Type)
	var failed struct{ Kind string }
	require.NoError(t, json.Unmarshal(evs[len(evs)-2].Data, &failed))
	require.Equal(t, "interrupted", failed.Kind)
}
