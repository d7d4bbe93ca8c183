package main

import "github.com/urfave/cli/v2"

// allowDamagedName is the flag that lets system start open a ledger that a
// writer would otherwise refuse (ledger.ErrDamaged).
const allowDamagedName = "allow-damaged-ledger"

// The shared flags are made anew for each command: urfave/cli writes into
// a flag as it parses, so one value shared by several apps (tests run them
// in parallel) would be a data race.

func allowDamagedFlag() *cli.BoolFlag {
	return &cli.BoolFlag{
		Name: allowDamagedName,
		Usage: "start even if events were removed from the end of the ledger, or its chain is broken " +
			"after the last recorded head: the damage is logged and accepted, the projections are rebuilt " +
			"from the log as it is, and its head is recorded anew",
	}
}

func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON"}
}

func dryRunFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "dry-run", Usage: "show what would change without changing anything"}
}
