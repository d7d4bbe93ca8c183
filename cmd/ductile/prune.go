package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

func ledgerPruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "prune the logs (job_log) of jobs that ended before a cutoff, as the daemon does hourly past service.job_log_retention",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "before", Usage: "prune the logs of jobs that ended before `T` (RFC 3339, or an age such as 30d; default: now minus service.job_log_retention)"},
			dryRunFlag(),
			jsonFlag(),
		},
		Action: withExistingLedger(ledgerPrune),
	}
}

// pruneOutput is what ledger prune prints with --json.
type pruneOutput struct {
	Before string `json:"before"`
	Jobs   int64  `json:"jobs"` // jobs whose logs go (or would go)
	DryRun bool   `json:"dry_run"`
	Seq    int64  `json:"seq,omitempty"` // of the log.pruned recorded
}

func ledgerPrune(c *cli.Context, e *env, l *ledger.Ledger) error {
	cfg, err := serviceSettings(c.Context, e, l)
	if err != nil {
		return err
	}
	before := time.Now().Add(-cfg.Service.JobLogRetention)
	retention := cfg.Service.JobLogRetention
	if s := c.String("before"); s != "" {
		t, err := parseBefore(s, time.Now())
		if err != nil {
			return err
		}
		before, retention = t, 0
	}
	// Count on projections that hold every event (a daemon keeps its own).
	if err := daemon.CatchUpUnlessHeld(c.Context, e.stateDir, l, e.quietLogger()); err != nil {
		return err
	}
	n, err := views.PrunableJobs(c.Context, l, before)
	if err != nil {
		return err
	}
	out := pruneOutput{Before: before.UTC().Format(time.RFC3339Nano), Jobs: n, DryRun: c.Bool("dry-run")}
	if !out.DryRun && n > 0 {
		if out.Seq, err = commands.PruneJobLogs(c.Context, l, commands.PruneLogs{Before: before, Retention: retention, Jobs: n, By: events.ActorCLI}); err != nil {
			return err
		}
		if err := daemon.CatchUpUnlessHeld(c.Context, e.stateDir, l, e.quietLogger()); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	switch {
	case n == 0:
		fmt.Fprintf(e.stdout, "no job's log ended before %s: nothing to prune\n", out.Before)
	case out.DryRun:
		fmt.Fprintf(e.stdout, "would prune the logs of %d jobs that ended before %s (run without --dry-run to do it)\n", n, out.Before)
	default:
		fmt.Fprintf(e.stdout, "pruned the logs of %d jobs that ended before %s (log.pruned, seq %d)\n", n, out.Before, out.Seq)
	}
	return nil
}
