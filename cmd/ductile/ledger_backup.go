package main

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

func ledgerBackupCommand() *cli.Command {
	return &cli.Command{
		Name:  "backup",
		Usage: "copy the ledger, as of one moment, to a new file while the daemon runs, then verify the copy",
		Description: "The copy is SQLite's online backup of one read snapshot: the daemon goes on appending\n" +
			"meanwhile, and the copy holds every event committed before the backup began. It is a single\n" +
			"file (no -wal beside it); archive files the ledger records are copied beside it. The copy is\n" +
			"then verified as ledger verify does (hash chain, projections against a fresh replay).\n" +
			"Restore: docs/operations.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Required: true, Usage: "write the copy to `FILE` (must not exist)"},
			dryRunFlag(),
			jsonFlag(),
		},
		Action: withReadLedger(ledgerBackup),
	}
}

// backupReport is what ledger backup prints with --json.
type backupReport struct {
	DryRun   bool                `json:"dry_run"`
	Source   string              `json:"source"`
	Backup   ledger.BackupResult `json:"backup"`
	Seconds  float64             `json:"seconds,omitempty"`
	Verified *verifyReport       `json:"verified,omitempty"`
}

func ledgerBackup(c *cli.Context, e *env, l *ledger.Ledger) error {
	to, asJSON := c.String("to"), c.Bool("json")
	if _, err := os.Stat(to); err == nil {
		return conflictf("%s already exists: choose a new --to file or remove it first", to)
	}
	report := backupReport{DryRun: c.Bool("dry-run"), Source: daemon.DBPath(e.stateDir), Backup: ledger.BackupResult{Path: to}}
	if report.DryRun {
		head, err := l.LastSeq(c.Context)
		if err != nil {
			return err
		}
		report.Backup.Head = head
		if asJSON {
			return printJSON(e.stdout, report)
		}
		fmt.Fprintf(e.stdout, "would copy %s (%d events, head seq %d or later) to %s and verify the copy (run without --dry-run to do it)\n",
			report.Source, head, head, to)
		return nil
	}
	start := time.Now()
	var shown int
	r, err := l.Backup(c.Context, to, func(done, total int) {
		// A line per tenth of a large copy (10 steps of 8 MiB or more).
		if asJSON || total < 20480 || done*10/total == shown*10/total && done != total {
			return
		}
		shown = done
		fmt.Fprintf(e.stderr, "copied %d/%d pages (%d%%)…\n", done, total, done*100/total)
	})
	report.Backup, report.Seconds = r, time.Since(start).Seconds()
	if err != nil {
		return err
	}
	backup, err := ledger.Open(c.Context, to, ledger.Options{ReadOnly: true, Logger: e.quietLogger()})
	if err != nil {
		return failf("the copy %s does not open: %v (the ledger may be damaged: run ductile ledger verify)", to, err)
	}
	defer backup.Close()
	verified, err := verifyLedger(c.Context, e, backup, asJSON)
	if err != nil {
		return err
	}
	report.Verified = &verified
	if asJSON {
		if err := printJSON(e.stdout, report); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "copied %s to %s in %.1fs: %d events, head seq %d (hash %.16s…), %.1f MiB\n",
			report.Source, to, report.Seconds, verified.Chain.Events, r.Head, r.HeadHash, float64(r.Bytes)/(1<<20))
		for _, a := range r.Archives {
			fmt.Fprintf(e.stdout, "copied the archive of events %d..%d beside it: %s\n", a.FirstSeq, a.LastSeq, a.File)
		}
		if verified.OK {
			fmt.Fprintf(e.stdout, "verified: hash chain intact, projections match a fresh replay to seq %d\n", verified.Checkpoint)
		}
	}
	if !verified.OK {
		fmt.Fprintf(e.stderr, "the copy does not verify (see: ductile ledger verify --state-dir of a folder holding it as ductile.db); "+
			"check the original with: ductile ledger verify\n")
		return silent(exitFailure)
	}
	return nil
}
