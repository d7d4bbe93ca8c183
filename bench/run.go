package bench

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
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/queries"
)

// Options configure Run.
type Options struct {
	Jobs int
	// Workers is the pool of both measurements; by default the daemon's own
	// default pool (config.Default: max(4, NumCPU-1)), since the bench
	// measures the daemon as it runs unconfigured.
	Workers   int
	Enqueuers int          // concurrent producers (default 8)
	Rounds    int          // alternating rounds of both measurements (default DefaultRounds)
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

// Result is what ductile bench prints.
type Result struct {
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

// DefaultRounds is how many alternating rounds Run makes unless told:
// short rounds follow the speed of a machine that changes from one second
// to the next (a VM with noisy neighbours) closely, while a round's ramp-up
// and tail (about one job per worker) stay around 1% of a 200-job round.
const DefaultRounds = 10

// Run measures end-to-end throughput on a scratch state directory: a
// daemon with durable (fsynced, group-committed) acceptance runs Jobs jobs of
// a trivial shell plugin; the same plugin's raw spawn rate with the same
// number of workers and no ledger is measured in the same run, the two
// alternating in Rounds rounds.
func Run(ctx context.Context, opts Options) (Result, error) {
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
		opts.Rounds = DefaultRounds
	}
	opts.Rounds = min(opts.Rounds, opts.Jobs)
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	res := Result{Jobs: opts.Jobs, Workers: opts.Workers, InProcess: opts.InProcess}
	dir, err := os.MkdirTemp(opts.TempDir, "ductile-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	pluginDir := filepath.Join(dir, "plugins", "bench")
	if err := writePlugin(pluginDir); err != nil {
		return res, err
	}

	cfg := config.Default()
	cfg.PluginRoots = []string{filepath.Dir(pluginDir)}
	cfg.Service.MaxWorkers = opts.Workers
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	daemonOptions := daemon.Options{StateDir: filepath.Join(dir, "state"), Config: cfg, Logger: quiet}
	open := daemon.Open
	if opts.InProcess {
		open = func(ctx context.Context, o daemon.Options) (*daemon.Daemon, error) {
			return daemon.OpenBench(ctx, o, map[string]pluginhost.Step{"bench": noopStep})
		}
	}
	d, err := open(ctx, daemonOptions)
	if err != nil {
		return res, err
	}
	defer d.Close()
	// The raw spawn rounds run the very plugin the daemon loaded.
	plugin, ok := d.Plugins().Get("bench")
	if !ok {
		return res, errors.New("the bench plugin did not load")
	}

	// The two measurements alternate in rounds (raw first in even rounds,
	// end to end first in odd ones), so a machine whose speed drifts during
	// the run (a VM, a laptop's clock) weighs on both alike. Between its
	// rounds the daemon is idle: nothing polls.
	var spawnTime, endToEndTime, enqueueTime time.Duration
	var spawnCPU, endToEndCPU time.Duration
	writesBefore := d.Ledger.WriteStats()
	done := 0
	for round := range opts.Rounds {
		n := opts.Jobs / opts.Rounds
		var roundSpawn, roundEndToEnd time.Duration
		if round == opts.Rounds-1 {
			n = opts.Jobs - done
		}
		raw := func() error {
			progress(fmt.Sprintf("round %d/%d: %d raw spawns on %s…", round+1, opts.Rounds, n, WorkerCount(opts.Workers)))
			cpuBefore, start := processCPU(), time.Now()
			if err := spawnRuns(ctx, plugin, n, opts.Workers); err != nil {
				return err
			}
			roundSpawn = time.Since(start)
			spawnTime += roundSpawn
			spawnCPU += processCPU() - cpuBefore
			return nil
		}
		endToEnd := func() error {
			progress(fmt.Sprintf("round %d/%d: %d jobs end to end…", round+1, opts.Rounds, n))
			if opts.CPUProfile != nil {
				if err := pprof.StartCPUProfile(opts.CPUProfile); err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
				opts.CPUProfile = nil // one profile: the first end-to-end round
			}
			cpuBefore, start := processCPU(), time.Now()
			if err := enqueueJobs(ctx, d, cfg, n, opts.Enqueuers); err != nil {
				return err
			}
			enqueueTime += time.Since(start)
			if err := waitForSuccesses(ctx, d, done+n); err != nil {
				return err
			}
			roundEndToEnd = time.Since(start)
			endToEndTime += roundEndToEnd
			endToEndCPU += processCPU() - cpuBefore
			return nil
		}
		steps := []func() error{raw, endToEnd}
		switch {
		case opts.InProcess:
			steps = steps[1:] // nothing to spawn
		case round%2 == 1:
			steps = []func() error{endToEnd, raw}
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return res, err
			}
		}
		done += n
		res.RoundJobsPerSec = append(res.RoundJobsPerSec, float64(n)/roundEndToEnd.Seconds())
		if !opts.InProcess {
			res.RoundRatios = append(res.RoundRatios, roundSpawn.Seconds()/roundEndToEnd.Seconds())
		}
	}
	writesAfter := d.Ledger.WriteStats()
	jobs := float64(opts.Jobs)
	res.JobsPerSec = jobs / endToEndTime.Seconds()
	if !opts.InProcess {
		res.SpawnPerSec = jobs / spawnTime.Seconds()
		res.SpawnCPUMSPerRun = milliseconds(spawnCPU) / jobs
		res.Ratio = spawnTime.Seconds() / endToEndTime.Seconds() // = JobsPerSec / SpawnPerSec
	}
	res.EnqueueMS = milliseconds(enqueueTime)
	res.CPUMSPerJob = milliseconds(endToEndCPU) / jobs
	res.CommitsPerJob = float64(writesAfter.Commits-writesBefore.Commits) / jobs
	res.FsyncsPerJob = float64(writesAfter.Syncs-writesBefore.Syncs) / jobs
	res.P50MS, res.P99MS, err = successLatencies(ctx, d)
	return res, err
}

// enqueueJobs enqueues n bench jobs from concurrent producers, each append
// durable, as independent clients would.
func enqueueJobs(ctx context.Context, d *daemon.Daemon, cfg *config.Config, n, producers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				job := commands.JobFor(cfg, "bench", "poll", events.ActorCLI)
				if _, err := commands.EnqueueJob(ctx, d.Ledger, job); err != nil {
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
func spawnRuns(ctx context.Context, plugin *pluginhost.Plugin, n, workers int) error {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				r := pluginhost.Run(ctx, plugin, pluginhost.Request{Protocol: pluginhost.ProtocolVersion, JobID: "bench", Command: "poll"}, pluginhost.RunOptions{Timeout: time.Minute})
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

// waitForSuccesses waits until n jobs have succeeded, or one is dead. It
// counts from the projector's own tally of applied events and wakes only
// then, so the bench's watching costs nothing per job.
func waitForSuccesses(ctx context.Context, d *daemon.Daemon, n int) error {
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

// successLatencies reads enqueue-to-success times from the job_queue
// projection.
func successLatencies(ctx context.Context, d *daemon.Daemon) (p50, p99 float64, err error) {
	var latencies []float64
	err = d.Ledger.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.DumpJobQueue(conn, func(r queries.DumpJobQueueRow) error {
			created, err := time.Parse(time.RFC3339Nano, r.CreatedAt)
			if err != nil || r.CompletedAt == nil {
				return err
			}
			completed, err := time.Parse(time.RFC3339Nano, *r.CompletedAt)
			if err != nil {
				return err
			}
			latencies = append(latencies, milliseconds(completed.Sub(created)))
			return nil
		})
	})
	if err != nil || len(latencies) == 0 {
		return 0, 0, err
	}
	slices.Sort(latencies)
	return quantile(latencies, 0.50), quantile(latencies, 0.99), nil
}

// quantile is the q-quantile of sorted, which is not empty.
func quantile(sorted []float64, q float64) float64 {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// WorkerCount says how many workers: "1 worker", "2 workers".
func WorkerCount(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}

func milliseconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// processCPU is the CPU time this process has used (not its children's).
func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
