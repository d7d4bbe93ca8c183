package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/events"
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
}

// BenchResult is what ductile bench prints.
type BenchResult struct {
	Jobs        int     `json:"jobs"`
	Workers     int     `json:"workers"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	SpawnPerSec float64 `json:"spawn_per_sec"`
	Ratio       float64 `json:"ratio"`
	// RoundRatios is each round's own ratio (its raw spawn time over its
	// end-to-end time, both over the round's jobs): their spread shows how
	// much the machine's speed moved during the run.
	RoundRatios []float64 `json:"round_ratios"`
	P50MS       float64   `json:"p50_ms"`
	P99MS       float64   `json:"p99_ms"`
	EnqueueMS   float64   `json:"enqueue_ms"` // time to durably accept all jobs
	// Where the time goes, per job of the end-to-end run (ductile's own CPU,
	// not the plugin's) and per run of the raw spawn measurement; the ratio
	// follows from them when the CPUs are the limit.
	CPUMSPerJob      float64 `json:"cpu_ms_per_job"`
	SpawnCPUMSPerRun float64 `json:"spawn_cpu_ms_per_run"`
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
	if opts.Workers <= 0 {
		opts.Workers = config.Default().Service.MaxWorkers
	}
	if opts.Enqueuers <= 0 {
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
	res := BenchResult{Jobs: opts.Jobs, Workers: opts.Workers}
	dir, err := os.MkdirTemp(opts.TempDir, "ductile-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	pluginDir := filepath.Join(dir, "plugins", "bench")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(pluginDir, pluginhost.ManifestFile), []byte(benchManifest), 0o644); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(pluginDir, "run.sh"), []byte(benchScript), 0o755); err != nil {
		return res, err
	}

	cfg := config.Default()
	cfg.PluginRoots = []string{filepath.Dir(pluginDir)}
	cfg.Service.MaxWorkers = opts.Workers
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := Open(ctx, Options{StateDir: filepath.Join(dir, "state"), Config: cfg, Logger: quiet})
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
		if round%2 == 1 {
			steps = []func() error{e2e, raw}
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return res, err
			}
		}
		done += n
		res.RoundRatios = append(res.RoundRatios, roundSpawn.Seconds()/roundE2E.Seconds())
	}
	ws := d.Ledger.WriteStats()
	jobs := float64(opts.Jobs)
	res.SpawnPerSec = jobs / spawnTime.Seconds()
	res.SpawnCPUMSPerRun = ms(spawnCPU) / jobs
	res.JobsPerSec = jobs / e2eTime.Seconds()
	res.Ratio = spawnTime.Seconds() / e2eTime.Seconds() // = JobsPerSec / SpawnPerSec
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
				enq := dispatch.JobFor(cfg, "bench", "poll", commands.ByCLI)
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
				if r.Kind != pluginhost.KindOK {
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
