package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// queueCommand is `queue`: the running and queued jobs, in the order they
// run (the CLI twin of GET /queue).
func queueCommand() *cli.Command {
	return &cli.Command{
		Name:  "queue",
		Usage: "show the queue: running and queued jobs, oldest first (the order they run in)",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "limit", Value: 50, Usage: "show at most `N` jobs (0: all of them)"},
			jsonFlag(),
		},
		Action: withReadLedger(queueShow),
	}
}

// queueShow prints the queue's counts and its first --limit jobs.
func queueShow(c *cli.Context, e *env, l *ledger.Ledger) error {
	limit := c.Int("limit")
	if limit < 0 {
		return usagef("--limit must be 0 (all) or more, not %d", limit)
	}
	q, err := views.ReadQueue(c.Context, l, limit)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, q)
	}
	running := fmt.Sprintf("running %d", q.Counts.Running+q.Counts.CancelRequested)
	if q.Counts.CancelRequested > 0 {
		running += fmt.Sprintf(" (%d cancel requested)", q.Counts.CancelRequested)
	}
	fmt.Fprintf(e.stdout, "queued %d, %s\n", q.Counts.Queued, running)
	if len(q.Jobs) > 0 {
		printJobTable(e, q.Jobs)
	}
	if q.More > 0 {
		fmt.Fprintf(e.stdout, "… and %d more (see: ductile queue --limit 0)\n", q.More)
	}
	return nil
}
