package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// workerCommand is `worker`: its subcommand list shows the fleet. Its
// Action, the worker host itself (`ductile worker --api URL …`), is set
// by cmd/ductile/worker.go; until then `ductile worker` shows its help.
func workerCommand() *cli.Command {
	return &cli.Command{
		Name:        "worker",
		Usage:       "remote worker hosts: list the registered ones (docs/remote-workers.md)",
		Subcommands: []*cli.Command{workerListCommand()},
	}
}

// workerListCommand is `worker list`: the registered remote workers, from
// the ledger (the CLI twin of GET /workers), with or without a daemon.
func workerListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the registered remote workers: host, version, plugins, claims (running jobs leased), last seen",
		Description: "Reads the ledger: each worker's last registration and the leases it holds on running jobs now.\n" +
			"last seen is the latest of its registration and of the claims and recorded renewals of the leases it holds\n" +
			"(renewals are recorded at most once per third of the lease period).",
		Flags:  []cli.Flag{jsonFlag()},
		Action: withReadLedger(workerList),
	}
}

// workerList prints the fleet.
func workerList(c *cli.Context, e *env, l *ledger.Ledger) error {
	workers, err := views.ReadFleet(c.Context, l)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, workers)
	}
	if len(workers) == 0 {
		fmt.Fprintln(e.stdout, "no worker has registered (ductile worker registers when it starts; see docs/remote-workers.md)")
		return nil
	}
	printFleet(e, workers)
	return nil
}

// printFleet prints one row per worker.
func printFleet(e *env, workers []views.FleetWorker) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOST\tVERSION\tPLUGINS\tCLAIMS\tLAST SEEN")
	for _, w := range workers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", w.Name, dashIfEmpty(w.Host), dashIfEmpty(w.Version), dashIfEmpty(strings.Join(w.Plugins, ",")), w.Claims, dashIfEmpty(w.LastSeen))
	}
	_ = tw.Flush()
}

// dashIfEmpty is s, or "-" for nothing.
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
