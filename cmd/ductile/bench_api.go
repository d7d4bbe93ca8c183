package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/bench"
)

// benchAPI is ductile bench --api.
func benchAPI(c *cli.Context, asJSON bool) error {
	for _, name := range []string{"in-process", "workers", "cli-latency", "cpuprofile", "jobs"} {
		if c.IsSet(name) {
			return usagef("--api measures the API of one daemon with its worker held: --%s does not apply", name)
		}
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the ductile binary: %w", err)
	}
	opts := bench.APIOptions{Binary: bin, Clients: c.IntSlice("clients"), Requests: c.Int("requests"), Progress: func(s string) {
		if !asJSON {
			fmt.Fprintln(c.App.ErrWriter, s)
		}
	}}
	if c.IsSet("rounds") {
		opts.Rounds = c.Int("rounds")
	}
	for _, n := range opts.Clients {
		if n < 1 {
			return usagef("--clients must be at least 1")
		}
	}
	if c.IsSet("requests") && opts.Requests < 1 {
		return usagef("--requests must be at least 1")
	}
	res, err := bench.APILoad(c.Context, opts)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(c.App.Writer, res)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "POST /plugin/bench/poll (durable enqueue), %d requests a round, clients in this process, the daemon in its own:\n", res.Requests)
	var counts []int
	for _, r := range res.Runs {
		if !slices.Contains(counts, r.Clients) {
			counts = append(counts, r.Clients)
		}
	}
	for _, n := range counts {
		var p50, p99, rate []float64
		for _, r := range res.Runs {
			if r.Clients == n {
				p50, p99, rate = append(p50, r.P50MS), append(p99, r.P99MS), append(rate, r.RequestsSec)
			}
		}
		fmt.Fprintf(w, "  %2d clients: p50 %s ms, p99 %s ms, %s req/s (min/median/max of %d rounds); daemon CPU %.3f ms per request\n",
			n, spread(p50, "%.2f"), spread(p99, "%.2f"), spread(rate, "%.0f"), len(rate), res.DaemonCPUMSPerRequest[n])
	}
	fmt.Fprintf(w, "the daemon's queue holds all %d jobs accepted\n", res.Queued)
	return nil
}

// spread is min/median/max of values.
func spread(values []float64, format string) string {
	sorted := slices.Sorted(slices.Values(values))
	return fmt.Sprintf(format+"/"+format+"/"+format, sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1])
}
