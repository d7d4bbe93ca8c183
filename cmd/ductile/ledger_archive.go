package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/schedule"
	"github.com/ductile/ductile/views"
)

func ledgerArchiveCommand() *cli.Command {
	return &cli.Command{
		Name:  "archive",
		Usage: "move events recorded before a time to an archive file beside the ledger, keeping the chain verifiable",
		Description: "Moves the oldest events (up to the last one recorded before --before, lowered so that no job or dedupe key\n" +
			"still in flight is split) to <ledger>.archive-<first>-<last>, then deletes them from the ledger and records\n" +
			"ledger.archived. It may run while the daemon does. Keep the archive files beside the ledger: ledger verify and\n" +
			"ledger replay read them. The file stops growing, but SQLite does not give freed pages back: --vacuum does\n" +
			"(with the daemon stopped).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "before", Usage: "archive events recorded before `T`: RFC 3339, or an age such as 90d or 720h"},
			&cli.BoolFlag{Name: "vacuum", Usage: "then rewrite the ledger to give the freed space back (needs the daemon stopped)"},
			dryRunFlag(),
			jsonFlag(),
		},
		Action: ledgerArchive,
	}
}

// parseBefore reads --before (ledger archive and ledger prune): an RFC 3339
// time, or an age ("90d": older than 90 days); a cutoff in the future is a
// usage error.
func parseBefore(s string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d, err := schedule.ParseDuration(s)
		if err != nil || d <= 0 {
			return time.Time{}, usagef("--before %q is neither an RFC 3339 time (2024-06-01T00:00:00Z) nor an age (90d, 720h)", s)
		}
		t = now.Add(-d)
	}
	if t.After(now) {
		return time.Time{}, usagef("--before %s is in the future: give a time in the past, or an age such as 30d", t.UTC().Format(time.RFC3339))
	}
	return t, nil
}

func ledgerArchive(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	if c.String("before") == "" {
		return usagef("ledger archive needs --before T: an RFC 3339 time, or an age such as 90d (see: ductile ledger archive --help)")
	}
	now := time.Now()
	before, err := parseBefore(c.String("before"), now)
	if err != nil {
		return err
	}
	asJSON, dry, vacuum := c.Bool("json"), c.Bool("dry-run"), c.Bool("vacuum")
	if h, err := daemon.Holder(e.stateDir); vacuum && err == nil && h.Daemon() {
		return hintf(errcode.Conflict, "stop the daemon first (Ctrl-C where it runs, kill -TERM its pid, or systemctl stop its unit), or archive without --vacuum: the file then stops growing and reuses the freed pages",
			"--vacuum rewrites the ledger and needs the daemon (pid %d) stopped", h.PID)
	}
	l, err := e.openExistingLedger(c.Context)
	if err != nil {
		return err
	}
	defer l.Close()
	cfg, err := serviceSettings(c.Context, e, l)
	if err != nil {
		return err
	}
	// Successes older than the dedupe window no longer matter to an
	// enqueue; archiving newer ones would let a duplicate through.
	if window := cfg.Service.DedupeTTL; before.After(now.Add(-window)) {
		return hintf(errcode.InvalidInput, fmt.Sprintf("choose --before %s or earlier", now.Add(-window).UTC().Format(time.RFC3339)),
			"--before %s is within the dedupe window (service.dedupe_ttl %s): archiving would forget recent successes a duplicate check needs",
			before.UTC().Format(time.RFC3339), window)
	}
	cmd := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: before, DryRun: dry}
	if !asJSON {
		cmd.Progress = func(copied, total int64) {
			fmt.Fprintf(e.stderr, "archived %d/%d events…\n", copied, total)
		}
	}
	plan, a, err := cmd.Run(c.Context, l)
	if errors.Is(err, ledger.ErrArchiveRaced) {
		return hintf(errcode.Conflict, "run ductile ledger archive again", "%v", err)
	}
	if err != nil {
		return err
	}
	result := struct {
		DryRun   bool               `json:"dry_run"`
		Plan     ledger.ArchivePlan `json:"plan"`
		Archive  *ledger.Archive    `json:"archive,omitempty"`
		Vacuumed *vacuumResult      `json:"vacuumed,omitempty"`
	}{DryRun: dry, Plan: plan}
	if a.File != "" {
		result.Archive = &a
	}
	if vacuum && !dry {
		l.Close()
		v, err := vacuumLedger(l.Path())
		if err != nil {
			return err
		}
		result.Vacuumed = &v
	}
	if asJSON {
		return printJSON(e.stdout, result)
	}
	w := e.stdout
	switch {
	case plan.Events == 0 && plan.Anchor == 0:
		fmt.Fprintf(w, "nothing to archive before %s\n", before.UTC().Format(time.RFC3339))
	case plan.Events == 0:
		fmt.Fprintf(w, "nothing to archive before %s (events up to seq %d are archived already)\n", before.UTC().Format(time.RFC3339), plan.Anchor)
	case dry:
		fmt.Fprintf(w, "would archive %d events (seq %d..%d, %d jobs, about %s) to %s\n",
			plan.Events, plan.Anchor+1, plan.Through, plan.JobStreams, humanBytes(plan.Bytes), plan.File)
	default:
		fmt.Fprintf(w, "archived %d events (seq %d..%d, %d jobs, about %s) to %s\n",
			plan.Events, a.FirstSeq, a.LastSeq, plan.JobStreams, humanBytes(plan.Bytes), filepath.Join(filepath.Dir(l.Path()), a.File))
		fmt.Fprintf(w, "keep it beside the ledger: ledger verify and ledger replay read it\n")
	}
	if plan.Lowered != "" {
		fmt.Fprintf(w, "stopped at seq %d instead of %d: %s\n", plan.Through, plan.Candidate, plan.Lowered)
	}
	if result.Vacuumed != nil {
		fmt.Fprintf(w, "vacuumed: %s → %s\n", humanBytes(result.Vacuumed.Before), humanBytes(result.Vacuumed.After))
	}
	return nil
}

type vacuumResult struct {
	Before int64 `json:"bytes_before"`
	After  int64 `json:"bytes_after"`
}

// vacuumLedger rewrites the ledger file without its free pages. The caller
// has checked no daemon runs; SQLite's locks keep any other writer out.
func vacuumLedger(path string) (vacuumResult, error) {
	var r vacuumResult
	size := func() int64 {
		var n int64
		for _, p := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(p); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	r.Before = size()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		return r, fmt.Errorf("vacuum: %w", err)
	}
	conn.SetBusyTimeout(10 * time.Second)
	for _, q := range []string{"PRAGMA wal_checkpoint(TRUNCATE);", "VACUUM;", "PRAGMA wal_checkpoint(TRUNCATE);"} {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			conn.Close()
			return r, fmt.Errorf("vacuum: %s: %w", strings.TrimSuffix(q, ";"), err)
		}
	}
	if err := conn.Close(); err != nil {
		return r, fmt.Errorf("vacuum: %w", err)
	}
	r.After = size()
	return r, nil
}

// printArchivesOK says which archives ledger verify checked.
func printArchivesOK(w io.Writer, archives []ledger.ArchiveCheck) {
	if len(archives) == 0 {
		return
	}
	first, last := archives[0], archives[len(archives)-1]
	fmt.Fprintf(w, "archives: %d file(s) hold seq %d..%d, each intact and linked to the next file\n", len(archives), first.FirstSeq, last.LastSeq)
}

// printArchiveProblems says what is wrong with the archives, and that the
// main file's own chain is intact (verify reports a broken one first).
func printArchiveProblems(w io.Writer, chain ledger.VerifyResult, archives []ledger.ArchiveCheck) {
	for _, a := range archives {
		switch {
		case a.Missing:
			fmt.Fprintf(w, "ARCHIVE MISSING: events %d..%d were archived to %s, which is not there\n", a.FirstSeq, a.LastSeq, a.Path)
		case !a.OK:
			fmt.Fprintf(w, "ARCHIVE DAMAGED: %s (events %d..%d): %s\n", a.Path, a.FirstSeq, a.LastSeq, a.Problem)
		}
	}
	fmt.Fprintf(w, "the ledger's own chain is intact (%d events from seq %d, after the archived prefix), but the projections "+
		"cannot be compared with a replay of the whole log: put the archive file(s) back beside the ledger (restore them from a backup)\n",
		chain.Events, chain.ArchivedThrough+1)
}
