package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// roleAdoptRestore is what the state directory's lock says while ledger
// adopt-restore holds it.
const roleAdoptRestore = "adopt-restore"

func ledgerAdoptRestoreCommand() *cli.Command {
	return &cli.Command{
		Name:  "adopt-restore",
		Usage: "accept a ledger restored from a backup or a replica that is older than its head witness, and record it",
		Description: "The daemon refuses a ledger that ends before the head its head witness (ductile.db.head) names:\n" +
			"that is what a restored copy looks like, and also what deleting events looks like. When the\n" +
			"ledger was restored on purpose, this checks that the lag is the only problem (the hash chain\n" +
			"verifies, the projector's checkpoints match, the archives are there), appends ledger.restore_adopted\n" +
			"saying how many events the copy lacks, and lets the witness follow the restored head.\n" +
			"Stop the daemon first. See docs/operations.md (Restore).",
		Flags:  []cli.Flag{dryRunFlag(), jsonFlag()},
		Action: ledgerAdoptRestore,
	}
}

// adoptReport is what ledger adopt-restore prints with --json.
type adoptReport struct {
	DryRun  bool                            `json:"dry_run"`
	Adopted bool                            `json:"adopted"`
	Restore events.LedgerRestoreAdoptedData `json:"restore"`
	Seq     int64                           `json:"seq,omitempty"` // the ledger.restore_adopted event
}

func ledgerAdoptRestore(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	dry, asJSON := c.Bool("dry-run"), c.Bool("json")
	path := daemon.DBPath(e.stateDir)
	if _, err := os.Stat(path); err != nil {
		return e.noLedger()
	}
	if dry {
		h, err := daemon.Holder(e.stateDir)
		if err != nil {
			return err
		}
		if h.Held {
			return conflictf("process %d (ductile %s) is running on %s: stop it before adopting a restore", h.PID, h.Role, e.stateDir)
		}
	} else {
		lock, err := daemon.AcquireLock(e.stateDir, roleAdoptRestore)
		var held *daemon.LockError
		if errors.As(err, &held) {
			return conflictf("process %d (ductile %s) is running on %s: stop it before adopting a restore", held.PID, held.Role, e.stateDir)
		}
		if err != nil {
			return err
		}
		defer lock.Release()
	}
	report := adoptReport{DryRun: dry}
	if err := checkLaggingRestore(c, e, &report); err != nil {
		return err
	}
	if report.Restore.WitnessSeq == 0 {
		if asJSON {
			return printJSON(e.stdout, report)
		}
		fmt.Fprintf(e.stdout, "nothing to adopt: the ledger's head (seq %d) is where its head witness says (start it as it is)\n", report.Restore.HeadSeq)
		return nil
	}
	if !dry {
		l, err := ledger.Open(c.Context, path, ledger.Options{AdoptRestore: true, Logger: e.quietLogger()})
		if err != nil {
			return ledgerError(err)
		}
		seqs, err := l.Append(c.Context, ledger.NewEvent{
			Stream: events.LedgerStream, ExpectedVersion: ledger.AnyVersion, Type: events.LedgerRestoreAdopted,
			Data: report.Restore, Meta: ledger.Meta{Actor: events.ActorCLI},
		})
		// Close flushes the append, and the head witness with it.
		if cerr := l.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		report.Adopted, report.Seq = true, seqs[len(seqs)-1]
	}
	if asJSON {
		return printJSON(e.stdout, report)
	}
	r := report.Restore
	verb := "adopted"
	if dry {
		verb = "would adopt"
	}
	fmt.Fprintf(e.stdout, "%s the restored ledger: it ends at seq %d, its head witness named seq %d: the %d events after seq %d are not in it\n",
		verb, r.HeadSeq, r.WitnessSeq, r.Missing, r.HeadSeq)
	if dry {
		fmt.Fprintln(e.stdout, "(run without --dry-run to record ledger.restore_adopted and move the witness)")
		return nil
	}
	fmt.Fprintf(e.stdout, "recorded ledger.restore_adopted at seq %d; start the daemon: jobs that were running at the copy are recovered and retried\n", report.Seq)
	return nil
}

// checkLaggingRestore fills report.Restore from the ledger as it is: the
// head, and the witness if the ledger lags it (0 if it does not). Anything
// else wrong is an error saying what to do instead.
func checkLaggingRestore(c *cli.Context, e *env, report *adoptReport) error {
	l, err := e.readLedger(c.Context)
	if err != nil {
		return err
	}
	defer l.Close()
	head, err := l.CheckHead(c.Context)
	if err != nil {
		return err
	}
	report.Restore.HeadSeq, report.Restore.HeadHash = head.Head, head.HeadHash
	if head.OK() {
		return nil
	}
	if !head.Lagging {
		return failf("this is not a restore that lags its witness: %s\n(details: ductile ledger verify; to go on with the ledger as it is: ductile system start --%s)",
			head.Problem, allowDamagedName)
	}
	chain, err := l.Verify(c.Context, nil)
	if err != nil {
		return err
	}
	if !chain.OK {
		return failf("the restored ledger's hash chain breaks at seq %d: %s (restore another copy)", chain.BadSeq, chain.Problem)
	}
	archives, err := l.VerifyArchives(c.Context)
	if err != nil {
		return err
	}
	for _, a := range archives {
		if !a.OK {
			return failf("archive %s does not verify: %s (restore the archive files beside the ledger too)", a.File, a.Problem)
		}
	}
	for _, m := range head.Recorded {
		if strings.HasPrefix(m.By, "head witness") {
			report.Restore.WitnessSeq, report.Restore.WitnessHash = m.Seq, m.Hash
		}
	}
	report.Restore.Missing = report.Restore.WitnessSeq - head.Head
	report.Restore.HeadHash = head.HeadHash
	return nil
}
