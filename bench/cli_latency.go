package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// CLIOptions configure CLILatency.
type CLIOptions struct {
	// Binary is a ductile executable: CLILatency runs it as the daemon
	// (system start) and as the CLI that enqueues (plugin run).
	Binary string
	Jobs   int // jobs enqueued from each kind of producer (default 100)
	// Idle is how long the daemon is left idle before each enqueue
	// (default 250 ms: past the WAL watcher's last trailing wake-up).
	Idle     time.Duration
	Progress func(string) // optional progress lines
	TempDir  string       // parent of the scratch state dir (default os.TempDir())
}

// CLIResult is what ductile bench --cli-latency prints: for jobs enqueued
// one at a time on an idle daemon, by a CLI process each and by a process
// that stays open, how long from enqueue to start and how much CPU the
// daemon spent per job.
type CLIResult struct {
	Jobs int `json:"jobs"`
	// CLI: each job enqueued by its own ductile plugin run.
	CLI Latency `json:"cli"`
	// Open: each job enqueued by one process that keeps the ledger open
	// (this one): the CLI's start, open and exit taken away.
	Open Latency `json:"open"`
}

// Latency is one producer's figures.
type Latency struct {
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

// CLILatency starts a daemon (Binary system start) on a scratch state
// directory with the bench plugin, then enqueues Jobs jobs one at a time,
// each once the daemon has been idle for Idle: first each by a ductile
// plugin run of its own, then each from this process's own ledger.
func CLILatency(ctx context.Context, opts CLIOptions) (CLIResult, error) {
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
	res := CLIResult{Jobs: opts.Jobs}
	dir, err := os.MkdirTemp(opts.TempDir, "ductile-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := writePlugin(filepath.Join(dir, "plugins", "bench")); err != nil {
		return res, err
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(fmt.Sprintf("plugin_roots: [%q]\n", filepath.Join(dir, "plugins"))), 0o600); err != nil {
		return res, err
	}
	stateDir := filepath.Join(dir, "state")
	args := func(a ...string) []string {
		return append([]string{"--config", configPath, "--state-dir", stateDir}, a...)
	}

	proc, err := startDaemonProcess(ctx, opts.Binary, stateDir, args("system", "start"))
	if err != nil {
		return res, err
	}
	defer proc.Stop()
	l, err := ledger.Open(ctx, daemon.DBPath(stateDir), ledger.Options{Logger: slog.New(slog.DiscardHandler)})
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
		r, err := commands.EnqueueJob(ctx, l, commands.JobFor(cfg, "bench", "poll", events.ActorCLI))
		return r.JobID, err
	}
	daemonPID := proc.PID()
	if _, err := measureLatency(ctx, l, daemonPID, 1, opts.Idle, byCLI); err != nil { // warm up
		return res, err
	}
	progress(fmt.Sprintf("%d jobs, each enqueued by a plugin run on an idle daemon…", opts.Jobs))
	if res.CLI, err = measureLatency(ctx, l, daemonPID, opts.Jobs, opts.Idle, byCLI); err != nil {
		return res, err
	}
	progress(fmt.Sprintf("%d jobs, each enqueued by a process that stays open, on an idle daemon…", opts.Jobs))
	if res.Open, err = measureLatency(ctx, l, daemonPID, opts.Jobs, opts.Idle, byOpen); err != nil {
		return res, err
	}
	return res, nil
}

// measureLatency enqueues n jobs with enqueue, one at a time on a daemon
// left idle for idle, waits for each to succeed, and reads their
// enqueue-to-start times from the ledger.
func measureLatency(ctx context.Context, l *ledger.Ledger, daemonPID, n int, idle time.Duration, enqueue func() (string, error)) (Latency, error) {
	var out Latency
	latencies := make([]float64, 0, n)
	cpuBefore, cpuKnown := processCPUOf(daemonPID)
	// Each job's events come after the previous job's success, and after
	// what this process has seen of the ledger before the first.
	after := l.Head()
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
		jobEvents, last, err := waitForJob(ctx, l, after, id)
		if err != nil {
			return out, err
		}
		latencies = append(latencies, milliseconds(jobEvents[1].RecordedAt.Sub(jobEvents[0].RecordedAt)))
		after = last
	}
	if cpuAfter, ok := processCPUOf(daemonPID); ok && cpuKnown {
		out.DaemonCPUMSPerJob = milliseconds(cpuAfter-cpuBefore) / float64(n)
	}
	slices.Sort(latencies)
	out.P50MS, out.P99MS, out.MaxMS = quantile(latencies, 0.50), quantile(latencies, 0.99), latencies[len(latencies)-1]
	return out, nil
}

// waitForJob follows job id's events, which all come after seq after, until
// the job succeeds, and returns them with the seq of its job.succeeded.
func waitForJob(ctx context.Context, l *ledger.Ledger, after int64, id string) (jobEvents []ledger.Event, last int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = l.Follow(ctx, after, ledger.Filter{Stream: events.JobStream(id)}, func(ev ledger.Event) error {
		jobEvents = append(jobEvents, ev)
		switch ev.Type {
		case events.JobSucceeded:
			if len(jobEvents) < 3 || jobEvents[1].Type != events.JobStarted {
				return fmt.Errorf("bench job %s: unexpected events", id)
			}
			last = ev.Seq
			return ledger.ErrStopFollowing
		case events.JobDead, events.JobFailed, events.JobTimedOut:
			return fmt.Errorf("bench job %s failed: %s", id, ev.Data)
		}
		return nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, 0, fmt.Errorf("bench job %s: %w", id, ctx.Err())
	case err != nil:
		return nil, 0, err
	}
	return jobEvents, last, nil
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
