package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/bench"
	"github.com/ductile/ductile/config"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure end-to-end jobs/s against the raw spawn rate of the same plugin",
		Description: "Starts a daemon on a scratch state directory (durable, fsynced acceptance), enqueues\n" +
			"--jobs jobs of a trivial shell plugin from concurrent producers, waits for all to\n" +
			"succeed, and compares the rate with the same plugin spawned directly by as many workers\n" +
			"(by default as many as the daemon's own default pool: max(4, NumCPU-1)).\n" +
			"The two measurements alternate in --rounds rounds, so drift in the machine's speed\n" +
			"weighs on both alike.\n\n" +
			"--in-process runs the same durable path with a built-in no-op step instead of a plugin\n" +
			"process: the core's own jobs/s and CPU per job. --cli-latency starts a real daemon and\n" +
			"enqueues jobs one at a time on it while idle, each by a ductile plugin run, then from a\n" +
			"process that stays open: enqueue→start latency and the daemon's CPU per job.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "jobs", Value: 2000, Usage: "run `N` jobs"},
			&cli.IntFlag{Name: "workers", Usage: "`N` workers for both measurements", DefaultText: fmt.Sprintf("the daemon's default pool, max(4, NumCPU-1) = %d; %d with --in-process", config.Default().Service.MaxWorkers, bench.DefaultInProcessWorkers)},
			&cli.BoolFlag{Name: "cli-latency", Usage: "instead: start a daemon, enqueue jobs one at a time on it while idle, each by a ductile plugin run (then from one process that stays open), and report enqueue→start latency and the daemon's CPU per job (--jobs: how many of each, default 100)"},
			&cli.BoolFlag{Name: "api", Usage: "instead: start a daemon with its HTTP API and load POST /plugin/bench/poll from this process with keep-alive clients: p50, p99 and requests/s (see --clients, --requests)"},
			&cli.IntSliceFlag{Name: "clients", Usage: "with --api: the concurrent client counts to measure", DefaultText: "1 and 32"},
			&cli.IntFlag{Name: "requests", Usage: "with --api: `N` requests per round", DefaultText: "5000"},
			&cli.BoolFlag{Name: "in-process", Usage: "run the jobs with a built-in no-op step instead of a plugin process (the same durable path): the core's own jobs/s and CPU per job, with no raw spawn measurement"},
			&cli.IntFlag{Name: "rounds", Value: bench.DefaultRounds, Usage: "alternate the two measurements in `N` rounds (drift weighs on both alike)"},
			&cli.PathFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the first end-to-end round to `FILE` (go tool pprof)"},
			jsonFlag(),
		},
		Action: func(c *cli.Context) (err error) {
			for _, name := range []string{"jobs", "workers", "rounds"} {
				if c.Int(name) < 1 && (name != "workers" || c.IsSet(name)) {
					return usagef("--%s must be at least 1", name)
				}
			}
			asJSON := c.Bool("json")
			w := c.App.ErrWriter
			if c.Bool("api") {
				return benchAPI(c, asJSON)
			}
			if c.Bool("cli-latency") {
				return benchCLILatency(c, asJSON)
			}
			opts := bench.Options{Jobs: c.Int("jobs"), Workers: c.Int("workers"), Rounds: c.Int("rounds"), InProcess: c.Bool("in-process"),
				Progress: func(s string) {
					if !asJSON {
						fmt.Fprintln(w, s)
					}
				}}
			if path := c.Path("cpuprofile"); path != "" {
				f, err := os.Create(path)
				if err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer func() {
					if cerr := f.Close(); cerr != nil && err == nil {
						err = fmt.Errorf("cpu profile: %w", cerr)
					}
				}()
				opts.CPUProfile = f
			}
			res, err := bench.Run(c.Context, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.App.Writer, res)
			}
			if res.InProcess {
				spread := ""
				if len(res.RoundJobsPerSec) > 1 {
					spread = fmt.Sprintf(" (its %d rounds: %.0f–%.0f)", len(res.RoundJobsPerSec), slices.Min(res.RoundJobsPerSec), slices.Max(res.RoundJobsPerSec))
				}
				fmt.Fprintf(c.App.Writer, "%d jobs in process (a no-op step, no plugin process) on %s: %.0f jobs/s end to end%s\n",
					res.Jobs, bench.WorkerCount(res.Workers), res.JobsPerSec, spread)
			} else {
				spread := ""
				if len(res.RoundRatios) > 1 {
					spread = fmt.Sprintf(" (its %d rounds: %.2f–%.2f)", len(res.RoundRatios), slices.Min(res.RoundRatios), slices.Max(res.RoundRatios))
				}
				fmt.Fprintf(c.App.Writer, "%d jobs on %s: %.0f jobs/s end to end, %.0f spawns/s raw, ratio %.2f%s\n",
					res.Jobs, bench.WorkerCount(res.Workers), res.JobsPerSec, res.SpawnPerSec, res.Ratio, spread)
			}
			fmt.Fprintf(c.App.Writer, "enqueue→success latency p50 %.1f ms, p99 %.1f ms; all jobs durably accepted in %.0f ms\n",
				res.P50MS, res.P99MS, res.EnqueueMS)
			if res.InProcess {
				fmt.Fprintf(c.App.Writer, "ductile's CPU: %.3f ms per job; %.2f commits and %.2f fsyncs per job\n",
					res.CPUMSPerJob, res.CommitsPerJob, res.FsyncsPerJob)
			} else {
				fmt.Fprintf(c.App.Writer, "ductile's CPU: %.2f ms per job end to end, %.2f ms per raw spawn; %.2f commits and %.2f fsyncs per job\n",
					res.CPUMSPerJob, res.SpawnCPUMSPerRun, res.CommitsPerJob, res.FsyncsPerJob)
			}
			return nil
		},
	}
}

// benchCLILatency is ductile bench --cli-latency.
func benchCLILatency(c *cli.Context, asJSON bool) error {
	for _, name := range []string{"in-process", "workers", "rounds", "cpuprofile"} {
		if c.IsSet(name) {
			return usagef("--cli-latency measures one daemon as it runs unconfigured: --%s does not apply", name)
		}
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the ductile binary: %w", err)
	}
	opts := bench.CLIOptions{Binary: bin, Progress: func(s string) {
		if !asJSON {
			fmt.Fprintln(c.App.ErrWriter, s)
		}
	}}
	if c.IsSet("jobs") {
		opts.Jobs = c.Int("jobs")
	}
	res, err := bench.CLILatency(c.Context, opts)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.App.Writer, res)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "%d jobs each, enqueued one at a time on an idle daemon; enqueue→start and the daemon's CPU per job:\n", res.Jobs)
	for _, p := range []struct {
		name string
		l    bench.Latency
	}{{"by ductile plugin run", res.CLI}, {"by a process kept open", res.Open}} {
		cpu := "n/a"
		if p.l.DaemonCPUMSPerJob > 0 {
			cpu = fmt.Sprintf("%.2f ms", p.l.DaemonCPUMSPerJob)
		}
		fmt.Fprintf(w, "  %-22s p50 %.1f ms, p99 %.1f ms, max %.1f ms; daemon CPU %s per job\n", p.name, p.l.P50MS, p.l.P99MS, p.l.MaxMS, cpu)
	}
	return nil
}
