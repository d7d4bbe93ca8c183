package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/queries"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Jobs int
	// Workers is the pool of both measurements; by default the daemon's own
	// default pool (config.Default: max(1, NumCPU-1)), since the bench
	// measures the daemon as it runs unconfigured.
	Workers   int
	Enqueuers int          // concurrent producers (default 8)
	Rounds    int          // alternating rounds of both measurements (default DefaultBenchRounds)
	Progress  func(string) // optional progress lines
	TempDir   string       // parent of the scratch state dir (default os.TempDir())
	// CPUProfile, if set, receives a Go CPU profile of the first end-to-end
	// round.
	CPUProfile io.Writer
	// InProcess runs the jobs with a built-in no-op step instead of a plugin
	// process (the same durable path otherwise), and makes no raw spawn
	// measurement: the core's own cost, apart from process spawning. Its
	// pool defaults to DefaultInProcessWorkers, its producers to
	// DefaultInProcessEnqueuers.
	InProcess bool
}

// A no-op step holds no CPU while it runs, so the pool only bounds how many
// jobs are in flight, and the more there are, the more starts and outcomes
// one commit records. The producers must keep such a pool fed (each waits
// for the fsync of its enqueue).
const (
	DefaultInProcessWorkers   = 16
	DefaultInProcessEnqueuers = 32
)

// noopStep answers every request as the bench plugin's script does.
func noopStep(context.Context, []byte) ([]byte, error) {
	return []byte(`{"status":"ok","result":"ok"}`), nil
}

// BenchResult is what ductile bench prints.
type BenchResult struct {
	Jobs      int  `json:"jobs"`
	Workers   int  `json:"workers"`
	InProcess bool `json:"in_process,omitempty"`
	// JobsPerSec is over the end-to-end rounds; RoundJobsPerSec each
	// round's own, whose spread shows how much the machine's speed moved.
	JobsPerSec      float64   `json:"jobs_per_sec"`
	RoundJobsPerSec []float64 `json:"round_jobs_per_sec"`
	SpawnPerSec     float64   `json:"spawn_per_sec,omitempty"`
	Ratio           float64   `json:"ratio,omitempty"`
	// RoundRatios is each round's own ratio (its raw spawn time over its
	// end-to-end time, both over the round's jobs): their spread shows how
	// much the machine's speed moved during the run.
	RoundRatios []float64 `json:"round_ratios,omitempty"`
	P50MS       float64   `json:"p50_ms"`
	P99MS       float64   `json:"p99_ms"`
	EnqueueMS   float64   `json:"enqueue_ms"` // time to durably accept all jobs
	// Where the time goes, per job of the end-to-end run (ductile's own CPU,
	// not the plugin's) and per run of the raw spawn measurement; the ratio
	// follows from them when the CPUs are the limit.
	CPUMSPerJob      float64 `json:"cpu_ms_per_job"`
	SpawnCPUMSPerRun float64 `json:"spawn_cpu_ms_per_run,omitempty"`
	CommitsPerJob    float64 `json:"commits_per_job"`
	FsyncsPerJob     float64 `json:"fsyncs_per_job"`
}

const benchManifest = `manifest_spec: ductile.plugin
manifest_version: 1
name: bench
version: 1.0.0
protocol: 2
entrypoint: run.sh
description: does nothing, quickly
commands:
  poll: {type: read}
`

const benchScript = "#!/bin/sh\ncat >/dev/null\necho '{\"status\":\"ok\",\"result\":\"ok\"}'\n"

// writeBenchPlugin writes the bench plugin into dir.
func writeBenchPlugin(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, pluginhost.ManifestFile), []byte(benchManifest), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "run.sh"), []byte(benchScript), 0o755)
}

// DefaultBenchRounds is how many alternating rounds Bench makes unless told:
// short rounds follow the speed of a machine that changes from one second
// to the next (a VM with noisy neighbours) closely, while a round's ramp-up
// and tail (about one job per worker) stay around 1% of a 200-job round.
const DefaultBenchRounds = 10

// Bench measures end-to-end throughput on a scratch state directory: a
// daemon with durable (fsynced, group-committed) acceptance runs Jobs jobs of
// a trivial shell plugin; the same plugin's raw spawn rate with the same
// number of workers and no ledger is measured in the same run, the two
// alternating in Rounds rounds.
func Bench(ctx context.Context, opts BenchOptions) (BenchResult, error) {
	if opts.Jobs <= 0 {
		opts.Jobs = 2000
	}
	switch {
	case opts.Workers > 0:
	case opts.InProcess:
		opts.Workers = DefaultInProcessWorkers
	default:
		opts.Workers = config.Default().Service.MaxWorkers
	}
	switch {
	case opts.Enqueuers > 0:
	case opts.InProcess:
		opts.Enqueuers = DefaultInProcessEnqueuers
	default:
		opts.Enqueuers = 8
	}
	if opts.Rounds <= 0 {
		opts.Rounds = DefaultBenchRounds
	}
	opts.Rounds = min(opts.Rounds, opts.Jobs)
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	res := BenchResult{Jobs: opts.Jobs, Workers: opts.Workers, InProcess: opts.InProcess}
	dir, err := os.MkdirTemp(opts.TempDir, "ductile-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	pluginDir := filepath.Join(dir, "plugins", "bench")
	if err := writeBenchPlugin(pluginDir); err != nil {
		return res, err
	}

	cfg := config.Default()
	cfg.PluginRoots = []string{filepath.Dir(pluginDir)}
	cfg.Service.MaxWorkers = opts.Workers
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dopts := Options{StateDir: filepath.Join(dir, "state"), Config: cfg, Logger: quiet}
	if opts.InProcess {
		dopts.Steps = map[string]pluginhost.Step{"bench": noopStep}
	}
	d, err := Open(ctx, dopts)
	if err != nil {
		return res, err
	}
	defer d.Close()
	// The raw spawn rounds run the very plugin the daemon loaded.
	p, ok := d.Plugins.Get("bench")
	if !ok {
		return res, errors.New("the bench plugin did not load")
	}

	// The two measurements alternate in rounds (raw first in even rounds,
	// end to end first in odd ones), so a machine whose speed drifts during
	// the run (a VM, a laptop's clock) weighs on both alike. Between its
	// rounds the daemon is idle: nothing polls.
	var spawnTime, e2eTime, enqueueTime time.Duration
	var spawnCPU, e2eCPU time.Duration
	ws0 := d.Ledger.WriteStats()
	done := 0
	for round := range opts.Rounds {
		n := opts.Jobs / opts.Rounds
		var roundSpawn, roundE2E time.Duration
		if round == opts.Rounds-1 {
			n = opts.Jobs - done
		}
		raw := func() error {
			progress(fmt.Sprintf("round %d/%d: %d raw spawns on %s…", round+1, opts.Rounds, n, WorkerCount(opts.Workers)))
			cpu0, t0 := processCPU(), time.Now()
			if err := spawnRuns(ctx, p, n, opts.Workers); err != nil {
				return err
			}
			roundSpawn = time.Since(t0)
			spawnTime += roundSpawn
			spawnCPU += processCPU() - cpu0
			return nil
		}
		e2e := func() error {
			progress(fmt.Sprintf("round %d/%d: %d jobs end to end…", round+1, opts.Rounds, n))
			if opts.CPUProfile != nil {
				if err := pprof.StartCPUProfile(opts.CPUProfile); err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
				opts.CPUProfile = nil // one profile: the first end-to-end round
			}
			cpu0, t0 := processCPU(), time.Now()
			if err := enqueueJobs(ctx, d, cfg, n, opts.Enqueuers); err != nil {
				return err
			}
			enqueueTime += time.Since(t0)
			if err := waitSucceeded(ctx, d, done+n); err != nil {
				return err
			}
			roundE2E = time.Since(t0)
			e2eTime += roundE2E
			e2eCPU += processCPU() - cpu0
			return nil
		}
		steps := []func() error{raw, e2e}
		switch {
		case opts.InProcess:
			steps = steps[1:] // nothing to spawn
		case round%2 == 1:
			steps = []func() error{e2e, raw}
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return res, err
			}
		}
		done += n
		res.RoundJobsPerSec = append(res.RoundJobsPerSec, float64(n)/roundE2E.Seconds())
		if !opts.InProcess {
			res.RoundRatios = append(res.RoundRatios, roundSpawn.Seconds()/roundE2E.Seconds())
		}
	}
	ws := d.Ledger.WriteStats()
	jobs := float64(opts.Jobs)
	res.JobsPerSec = jobs / e2eTime.Seconds()
	if !opts.InProcess {
		res.SpawnPerSec = jobs / spawnTime.Seconds()
		res.SpawnCPUMSPerRun = ms(spawnCPU) / jobs
		res.Ratio = spawnTime.Seconds() / e2eTime.Seconds() // = JobsPerSec / SpawnPerSec
	}
	res.EnqueueMS = ms(enqueueTime)
	res.CPUMSPerJob = ms(e2eCPU) / jobs
	res.CommitsPerJob = float64(ws.Commits-ws0.Commits) / jobs
	res.FsyncsPerJob = float64(ws.Syncs-ws0.Syncs) / jobs
	res.P50MS, res.P99MS, err = latencies(ctx, d)
	return res, err
}

// enqueueJobs enqueues n bench jobs from concurrent producers, each append
// durable, as independent clients would.
func enqueueJobs(ctx context.Context, d *Daemon, cfg *config.Config, n, producers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				enq := commands.JobFor(cfg, "bench", "poll", commands.ByCLI)
				if _, err := commands.EnqueueJob(ctx, d.Ledger, enq); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// spawnRuns runs the plugin n times on workers goroutines, with no ledger.
func spawnRuns(ctx context.Context, p *pluginhost.Plugin, n, workers int) error {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				r := pluginhost.Run(ctx, p, pluginhost.Request{Protocol: pluginhost.ProtocolVersion, JobID: "bench", Command: "poll"}, pluginhost.RunOptions{Timeout: time.Minute})
				if r.Kind != events.OutcomeOK {
					failed.Store(r.Err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := failed.Load(); v != nil {
		return fmt.Errorf("bench plugin failed: %v", v)
	}
	return nil
}

// waitSucceeded waits until n jobs have succeeded, or one is dead. It
// counts from the projector's own tally of applied events and wakes only
// then, so the bench's watching costs nothing per job.
func waitSucceeded(ctx context.Context, d *Daemon, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // drops whichever wait did not fire
	dead := d.Projector.Reached(ctx, events.JobDead, 1)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-d.Projector.Reached(ctx, events.JobSucceeded, int64(n)):
		return nil
	case <-dead:
		return fmt.Errorf("%d bench jobs failed", d.Projector.Seen(events.JobDead))
	}
}

// latencies reads enqueue-to-success times from the job_queue projection.
func latencies(ctx context.Context, d *Daemon) (p50, p99 float64, err error) {
	var lat []float64
	err = d.Ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.DumpJobQueue(conn, func(r queries.DumpJobQueueRow) error {
			created, err := time.Parse(time.RFC3339Nano, r.CreatedAt)
			if err != nil || r.CompletedAt == nil {
				return err
			}
			done, err := time.Parse(time.RFC3339Nano, *r.CompletedAt)
			if err != nil {
				return err
			}
			lat = append(lat, ms(done.Sub(created)))
			return nil
		})
	})
	if err != nil || len(lat) == 0 {
		return 0, 0, err
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	return at(0.50), at(0.99), nil
}

// WorkerCount says how many workers: "1 worker", "2 workers".
func WorkerCount(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// processCPU is the CPU time this process has used (not its children's).
func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// BenchCLIOptions configure BenchCLI.
type BenchCLIOptions struct {
	// Binary is a ductile executable: BenchCLI runs it as the daemon
	// (system start) and as the CLI that enqueues (plugin run).
	Binary string
	Jobs   int // jobs enqueued from each kind of producer (default 100)
	// Idle is how long the daemon is left idle before each enqueue
	// (default 250 ms: past the WAL watcher's last trailing wake-up).
	Idle     time.Duration
	Progress func(string) // optional progress lines
	TempDir  string       // parent of the scratch state dir (default os.TempDir())
}

// BenchCLIResult is what ductile bench --cli-latency prints: for jobs
// enqueued one at a time on an idle daemon, by a CLI process each and by a
// process that stays open, how long from enqueue to start and how much CPU
// the daemon spent per job.
type BenchCLIResult struct {
	Jobs int `json:"jobs"`
	// CLI: each job enqueued by its own ductile plugin run.
	CLI BenchLatency `json:"cli"`
	// Open: each job enqueued by one process that keeps the ledger open
	// (this one): the CLI's start, open and exit taken away.
	Open BenchLatency `json:"open"`
}

// BenchLatency is one producer's figures.
type BenchLatency struct {
	// Enqueue to start: recorded_at of job.started minus that of
	// job.enqueued.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// DaemonCPUMSPerJob is the daemon process's CPU (user and system, all
	// its threads) over the phase, per job; the plugin's own processes are
	// not counted. Zero where /proc cannot tell.
	DaemonCPUMSPerJob float64 `json:"daemon_cpu_ms_per_job"`
}

// BenchCLI starts a daemon (Binary system start) on a scratch state
// directory with the bench plugin, then enqueues Jobs jobs one at a time,
// each once the daemon has been idle for Idle: first each by a ductile
// plugin run of its own, then each from this process's own ledger.
func BenchCLI(ctx context.Context, opts BenchCLIOptions) (BenchCLIResult, error) {
	if opts.Jobs <= 0 {
		opts.Jobs = 100
	}
	if opts.Idle <= 0 {
		opts.Idle = 250 * time.Millisecond
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	res := BenchCLIResult{Jobs: opts.Jobs}
	dir, err := os.MkdirTemp(opts.TempDir, "ductile-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := writeBenchPlugin(filepath.Join(dir, "plugins", "bench")); err != nil {
		return res, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("plugin_roots: [%q]\n", filepath.Join(dir, "plugins"))), 0o600); err != nil {
		return res, err
	}
	stateDir := filepath.Join(dir, "state")
	args := func(a ...string) []string {
		return append([]string{"--config", cfgPath, "--state-dir", stateDir}, a...)
	}

	daemonCtx, stopDaemon := context.WithCancel(ctx)
	defer stopDaemon()
	cmd := exec.CommandContext(daemonCtx, opts.Binary, args("system", "start")...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start the daemon: %w", err)
	}
	defer func() {
		stopDaemon()
		_ = cmd.Wait()
	}()
	// The daemon holds the lock as a daemon once it is ready.
	for {
		if h, err := Holder(stateDir); err == nil && h.Daemon() {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if cmd.ProcessState != nil || (cmd.Process != nil && cmd.Process.Signal(syscall.Signal(0)) != nil) {
			return res, fmt.Errorf("the daemon exited: %s", stderr.String())
		}
	}
	l, err := ledger.Open(ctx, DBPath(stateDir), ledger.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return res, err
	}
	defer l.Close()
	cfg := config.Default()
	byCLI := func() (string, error) {
		out, err := exec.CommandContext(ctx, opts.Binary, args("plugin", "run", "bench", "--json")...).Output()
		if err != nil {
			return "", fmt.Errorf("plugin run: %w", err)
		}
		var run struct {
			JobID string `json:"job_id"`
		}
		if err := json.Unmarshal(out, &run); err != nil || run.JobID == "" {
			return "", fmt.Errorf("plugin run printed %q: %v", out, err)
		}
		return run.JobID, nil
	}
	byOpen := func() (string, error) {
		r, err := commands.EnqueueJob(ctx, l, commands.JobFor(cfg, "bench", "poll", commands.ByCLI))
		return r.JobID, err
	}
	if _, err := benchLatencies(ctx, l, cmd.Process.Pid, 1, opts.Idle, byCLI); err != nil { // warm up
		return res, err
	}
	progress(fmt.Sprintf("%d jobs, each enqueued by a plugin run on an idle daemon…", opts.Jobs))
	if res.CLI, err = benchLatencies(ctx, l, cmd.Process.Pid, opts.Jobs, opts.Idle, byCLI); err != nil {
		return res, err
	}
	progress(fmt.Sprintf("%d jobs, each enqueued by a process that stays open, on an idle daemon…", opts.Jobs))
	if res.Open, err = benchLatencies(ctx, l, cmd.Process.Pid, opts.Jobs, opts.Idle, byOpen); err != nil {
		return res, err
	}
	return res, nil
}

// benchLatencies enqueues n jobs with enqueue, one at a time on a daemon
// left idle for idle, waits for each to succeed, and reads their
// enqueue-to-start times from the ledger.
func benchLatencies(ctx context.Context, l *ledger.Ledger, daemonPID, n int, idle time.Duration, enqueue func() (string, error)) (BenchLatency, error) {
	var out BenchLatency
	lat := make([]float64, 0, n)
	cpu0, cpuKnown := processCPUOf(daemonPID)
	for range n {
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(idle):
		}
		id, err := enqueue()
		if err != nil {
			return out, err
		}
		evs, err := waitSucceeded1(ctx, l, id)
		if err != nil {
			return out, err
		}
		lat = append(lat, ms(evs[1].RecordedAt.Sub(evs[0].RecordedAt)))
	}
	if cpu1, ok := processCPUOf(daemonPID); ok && cpuKnown {
		out.DaemonCPUMSPerJob = ms(cpu1-cpu0) / float64(n)
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	out.P50MS, out.P99MS, out.MaxMS = at(0.50), at(0.99), lat[len(lat)-1]
	return out, nil
}

// waitSucceeded1 waits for job id to succeed and returns its events.
func waitSucceeded1(ctx context.Context, l *ledger.Ledger, id string) ([]ledger.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		changed := l.Changed()
		evs, err := l.ReadStream(ctx, events.JobStream(id))
		if err != nil {
			return nil, err
		}
		if n := len(evs); n > 0 {
			switch evs[n-1].Type {
			case events.JobSucceeded:
				if n < 3 || evs[1].Type != events.JobStarted {
					return nil, fmt.Errorf("bench job %s: unexpected events", id)
				}
				return evs, nil
			case events.JobDead, events.JobFailed, events.JobTimedOut:
				return nil, fmt.Errorf("bench job %s failed: %s", id, evs[n-1].Data)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bench job %s: %w", id, ctx.Err())
		case <-changed:
		}
	}
}

// processCPUOf is the CPU time process pid has used (user and system, all
// its threads), from /proc.
func processCPUOf(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 14th and 15th fields overall.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, true
}
