package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure end-to-end jobs/s against the raw spawn rate of the same plugin",
		Description: "Starts a daemon on a scratch state directory (durable, fsynced acceptance), enqueues\n" +
			"--jobs jobs of a trivial shell plugin from concurrent producers, waits for all to\n" +
			"succeed, and compares the rate with the same plugin spawned directly by as many workers\n" +
			"(by default as many as the daemon's own default pool: max(1, NumCPU-1)).\n" +
			"The two measurements alternate in --rounds rounds, so drift in the machine's speed\n" +
			"weighs on both alike.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "jobs", Value: 2000, Usage: "how many `N` jobs"},
			&cli.IntFlag{Name: "workers", Value: config.Default().Service.MaxWorkers, Usage: "`N` workers for both measurements: the daemon's default pool, max(1, NumCPU-1), unless set"},
			&cli.IntFlag{Name: "rounds", Value: daemon.DefaultBenchRounds, Usage: "alternate the two measurements in `N` rounds (drift weighs on both alike)"},
			&cli.PathFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the first end-to-end round to `FILE` (go tool pprof)"},
			jsonFlag,
		},
		Action: func(c *cli.Context) (err error) {
			for _, name := range []string{"jobs", "workers", "rounds"} {
				if c.Int(name) < 1 {
					return usagef("--%s must be at least 1", name)
				}
			}
			asJSON := c.Bool("json")
			w := c.App.ErrWriter
			opts := daemon.BenchOptions{Jobs: c.Int("jobs"), Workers: c.Int("workers"), Rounds: c.Int("rounds"),
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
			res, err := daemon.Bench(c.Context, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.App.Writer, res)
			}
			spread := ""
			if len(res.RoundRatios) > 1 {
				spread = fmt.Sprintf(" (its %d rounds: %.2f–%.2f)", len(res.RoundRatios), slices.Min(res.RoundRatios), slices.Max(res.RoundRatios))
			}
			fmt.Fprintf(c.App.Writer, "%d jobs on %s: %.0f jobs/s end to end, %.0f spawns/s raw, ratio %.2f%s\n",
				res.Jobs, daemon.WorkerCount(res.Workers), res.JobsPerSec, res.SpawnPerSec, res.Ratio, spread)
			fmt.Fprintf(c.App.Writer, "enqueue→success latency p50 %.1f ms, p99 %.1f ms; all jobs durably accepted in %.0f ms\n",
				res.P50MS, res.P99MS, res.EnqueueMS)
			fmt.Fprintf(c.App.Writer, "ductile's CPU: %.2f ms per job end to end, %.2f ms per raw spawn; %.2f commits and %.2f fsyncs per job\n",
				res.CPUMSPerJob, res.SpawnCPUMSPerRun, res.CommitsPerJob, res.FsyncsPerJob)
			return nil
		},
	}
}
