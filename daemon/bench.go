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
	Jobs      int
	Workers   int
	Enqueuers int          // concurrent producers (default 8)
	Progress  func(string) // optional progress lines
	TempDir   string       // parent of the scratch state dir (default os.TempDir())
	// CPUProfile, if set, receives a Go CPU profile of the end-to-end run.
	CPUProfile io.Writer
}

// BenchResult is what ductile bench prints.
type BenchResult struct {
	Jobs        int     `json:"jobs"`
	Workers     int     `json:"workers"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	SpawnPerSec float64 `json:"spawn_per_sec"`
	Ratio       float64 `json:"ratio"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
	EnqueueMS   float64 `json:"enqueue_ms"` // time to durably accept all jobs
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

// Bench measures end-to-end throughput on a scratch state directory: a
// daemon with durable (fsynced, group-committed) acceptance runs Jobs jobs of
// a trivial shell plugin; the same plugin's raw spawn rate with the same
// number of workers and no ledger is measured in the same run.
func Bench(ctx context.Context, opts BenchOptions) (BenchResult, error) {
	if opts.Jobs <= 0 {
		opts.Jobs = 2000
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Enqueuers <= 0 {
		opts.Enqueuers = 8
	}
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
	if err := os.WriteFile(filepath.Join(pluginDir, "manifest.yaml"), []byte(benchManifest), 0o644); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(pluginDir, "run.sh"), []byte(benchScript), 0o755); err != nil {
		return res, err
	}

	reg, problems := pluginhost.Discover([]string{filepath.Dir(pluginDir)}, pluginhost.DiscoverOptions{})
	if len(problems) > 0 {
		return res, errors.Join(problems...)
	}
	p, _ := reg.Get("bench")

	progress(fmt.Sprintf("measuring the raw spawn rate: %d runs on %d workers…", opts.Jobs, opts.Workers))
	cpu0 := processCPU()
	spawn, err := spawnRate(ctx, p, opts.Jobs, opts.Workers)
	if err != nil {
		return res, err
	}
	res.SpawnPerSec = spawn
	res.SpawnCPUMSPerRun = ms(processCPU()-cpu0) / float64(opts.Jobs)

	cfg := config.Default()
	cfg.PluginRoots = []string{filepath.Dir(pluginDir)}
	cfg.Service.MaxWorkers = opts.Workers
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := Open(ctx, Options{StateDir: filepath.Join(dir, "state"), Config: cfg, Logger: quiet})
	if err != nil {
		return res, err
	}
	defer d.Close()

	progress(fmt.Sprintf("running %d jobs end to end…", opts.Jobs))
	if opts.CPUProfile != nil {
		if err := pprof.StartCPUProfile(opts.CPUProfile); err != nil {
			return res, fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	ws0, cpu0 := d.Ledger.WriteStats(), processCPU()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, opts.Enqueuers)
	for range opts.Enqueuers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(opts.Jobs) {
				enq := dispatch.JobFor(cfg, "bench", "poll", commands.ByCLI)
				if _, err := commands.EnqueueJob(ctx, d.Ledger, enq); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	res.EnqueueMS = ms(time.Since(start))
	select {
	case err := <-errs:
		return res, err
	default:
	}
	if err := waitSucceeded(ctx, d, opts.Jobs); err != nil {
		return res, err
	}
	elapsed := time.Since(start)
	ws := d.Ledger.WriteStats()
	res.CPUMSPerJob = ms(processCPU()-cpu0) / float64(opts.Jobs)
	res.CommitsPerJob = float64(ws.Commits-ws0.Commits) / float64(opts.Jobs)
	res.FsyncsPerJob = float64(ws.Syncs-ws0.Syncs) / float64(opts.Jobs)
	res.JobsPerSec = float64(opts.Jobs) / elapsed.Seconds()
	res.Ratio = res.JobsPerSec / res.SpawnPerSec
	res.P50MS, res.P99MS, err = latencies(ctx, d)
	return res, err
}

func spawnRate(ctx context.Context, p *pluginhost.Plugin, n, workers int) (float64, error) {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				r := pluginhost.Run(ctx, p, pluginhost.Request{Protocol: 2, JobID: "bench", Command: "poll"}, pluginhost.RunOptions{Timeout: time.Minute})
				if r.Kind != pluginhost.KindOK {
					failed.Store(r.Err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v := failed.Load(); v != nil {
		return 0, fmt.Errorf("bench plugin failed: %v", v)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// waitSucceeded waits, on projector progress, until n jobs have succeeded.
// It counts from the projector's own tally of applied events, so the
// bench's watching costs no database reads.
func waitSucceeded(ctx context.Context, d *Daemon, n int) error {
	for {
		progressed := d.Projector.Progressed()
		if d.Projector.Seen(events.JobSucceeded) >= int64(n) {
			return nil
		}
		if dead := d.Projector.Seen(events.JobDead); dead > 0 {
			return fmt.Errorf("%d bench jobs failed", dead)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-progressed:
		}
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// processCPU is the CPU time this process has used (not its children's).
func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
