package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

func ledgerCommand() *cli.Command {
	return &cli.Command{
		Name:  "ledger",
		Usage: "inspect, verify and replay the event ledger",
		Subcommands: []*cli.Command{
			{
				Name:  "tail",
				Usage: "print events, oldest first; --follow keeps printing new ones",
				Flags: []cli.Flag{
					&cli.Int64Flag{Name: "from", Usage: "start at `SEQ` (default: the last --lines events)"},
					&cli.IntFlag{Name: "lines", Aliases: []string{"n"}, Value: 10, Usage: "without --from, how many recent events to show"},
					&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep waiting for new events until interrupted"},
					&cli.StringFlag{Name: "type", Usage: "only events of type `T`"},
					&cli.StringFlag{Name: "stream", Usage: "only events of stream `S`"},
					jsonFlag(),
				},
				Action: withReadLedger(ledgerTail),
			},
			{
				Name:   "verify",
				Usage:  "check the hash chain and that projections match a fresh replay (exit 1 on any problem)",
				Flags:  []cli.Flag{jsonFlag()},
				Action: withReadLedger(ledgerVerify),
			},
			{
				Name:  "replay",
				Usage: "rebuild projections from the log, in place or into a new file as of a point in the log",
				Flags: []cli.Flag{
					&cli.Int64Flag{Name: "until", Usage: "replay events up to `SEQ` (needs --out)"},
					&cli.StringFlag{Name: "out", Usage: "write a new ledger `FILE` holding the log up to --until and its projections"},
					dryRunFlag(),
					jsonFlag(),
				},
				Action: ledgerReplay,
			},
			{
				Name:   "stats",
				Usage:  "summarise the log, its streams and event types, and projector lag",
				Flags:  []cli.Flag{jsonFlag()},
				Action: withReadLedger(ledgerStats),
			},
			ledgerArchiveCommand(),
			ledgerPruneCommand(),
			ledgerBackupCommand(),
			ledgerAdoptRestoreCommand(),
		},
	}
}

// printEvent prints an event as one line of text, or of JSON.
func printEvent(w io.Writer, ev views.Event, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(w, "%8d  %s  %-28s v%-4d %-22s %s\n", ev.Seq, ev.RecordedAt, ev.Stream, ev.Version, ev.Type, ev.Data)
	return err
}

// ledgerTail prints events from --from, or the last --lines; --follow goes
// on with new ones until interrupted, which ends it quietly.
func ledgerTail(c *cli.Context, e *env, l *ledger.Ledger) error {
	var err error
	ctx := c.Context
	filter := ledger.Filter{Type: c.String("type"), Stream: c.String("stream")}
	var after int64
	if c.IsSet("from") {
		after = max(c.Int64("from")-1, 0)
	} else {
		after, err = views.TailStart(ctx, l, filter, c.Int("lines"))
		if err != nil {
			return err
		}
	}
	show := func(ev views.Event) error { return printEvent(e.stdout, ev, c.Bool("json")) }
	if !c.Bool("follow") {
		return views.ReadEvents(ctx, l, after, filter, show)
	}
	if err := views.FollowEvents(ctx, l, after, filter, show); err != nil && ctx.Err() == nil {
		return err
	}
	return nil // interrupted: that is how --follow ends
}

// progress returns a callback for a long walk over the log that prints
// line(n) to w (stderr) about every 65536 events (the walks report every few
// thousand) and at n == last (0: no final line); nil with --json, which keeps
// stderr clean.
func progress(w io.Writer, asJSON bool, last int64, line func(n int64) string) func(int64) {
	if asJSON {
		return nil
	}
	return func(n int64) {
		if n >= 4096 && n%65536 < 4096 || n == last {
			fmt.Fprintln(w, line(n))
		}
	}
}

// verifyReport is what ledger verify found (and ledger backup, of its copy).
type verifyReport struct {
	OK          bool                  `json:"ok"`
	Chain       ledger.VerifyResult   `json:"chain"`
	Archives    []ledger.ArchiveCheck `json:"archives,omitempty"`
	Head        ledger.HeadCheck      `json:"head"`
	Projections *projections.Mismatch `json:"projection_mismatch,omitempty"`
	Checkpoint  int64                 `json:"checkpoint"`
}

// verifyLedger checks l's hash chain, its recorded heads and archives, and
// that its projections match a fresh replay; progress lines go to stderr
// unless asJSON.
func verifyLedger(ctx context.Context, e *env, l *ledger.Ledger, asJSON bool) (verifyReport, error) {
	stage := func(name string) func(int64) {
		return progress(e.stderr, asJSON, 0, func(n int64) string { return fmt.Sprintf("%s: %d events…", name, n) })
	}
	chain, err := l.Verify(ctx, stage("hash chain"))
	if err != nil {
		return verifyReport{}, err
	}
	// The chain proves order, not completeness: compare the head with what
	// was recorded of it outside the events table.
	head, err := l.CheckHead(ctx)
	if err != nil {
		return verifyReport{}, err
	}
	archives, err := l.VerifyArchives(ctx)
	if err != nil {
		return verifyReport{}, err
	}
	report := verifyReport{Chain: chain, Archives: archives, Head: head}
	archivesOK := true
	for _, a := range archives {
		archivesOK = archivesOK && a.OK
	}
	if chain.OK && head.OK() && archivesOK {
		mismatch, cp, err := compareWithReplay(ctx, e, l, stage("replay"))
		if err != nil {
			return verifyReport{}, err
		}
		report.Projections, report.Checkpoint = mismatch, cp
	}
	report.OK = chain.OK && head.OK() && archivesOK && report.Projections == nil
	return report, nil
}

func ledgerVerify(c *cli.Context, e *env, l *ledger.Ledger) error {
	asJSON := c.Bool("json")
	report, err := verifyLedger(c.Context, e, l, asJSON)
	if err != nil {
		return err
	}
	chain, head, archives := report.Chain, report.Head, report.Archives
	archivesOK := true
	for _, a := range archives {
		archivesOK = archivesOK && a.OK
	}
	if asJSON {
		if err := printJSON(e.stdout, report); err != nil {
			return err
		}
	} else {
		w := e.stdout
		switch {
		case !chain.OK:
			fmt.Fprintf(w, "BROKEN at seq %d: %s\n", chain.BadSeq, chain.Problem)
			fmt.Fprintf(w, "events 1..%d verify; the ledger has been altered outside Ductile from seq %d on.\n", chain.BadSeq-1, chain.BadSeq)
			if !head.OK() {
				fmt.Fprintf(w, "also: %s\n", head.Problem)
			}
		case head.Truncated:
			fmt.Fprintf(w, "TRUNCATED: %s\n", head.Problem)
			fmt.Fprintf(w, "events 1..%d verify, but the events after seq %d were removed outside Ductile; the projections cannot bring them back.\n", chain.LastSeq, chain.LastSeq)
			fmt.Fprintf(w, "restore the ledger from a backup, or go on without them with: ductile system start --%s\n", allowDamagedName)
			if head.Lagging {
				fmt.Fprintln(w, "if this ledger is a copy you restored on purpose, adopt it with: ductile ledger adopt-restore")
			}
		case !head.OK():
			fmt.Fprintf(w, "DAMAGED: %s\n", head.Problem)
			fmt.Fprintf(w, "restore the ledger from a backup, or go on with it as it is with: ductile system start --%s\n", allowDamagedName)
		case !archivesOK:
			printArchiveProblems(w, chain, archives)
		case report.Projections != nil:
			m := report.Projections
			fmt.Fprintf(w, "hash chain OK (%d events), but projection %q differs from a fresh replay to seq %d\n", chain.Events, m.Projection, m.Checkpoint)
			fmt.Fprintf(w, "  line %d\n  live:     %s\n  replayed: %s\n", m.Line, m.Live, m.Replayed)
			fmt.Fprintf(w, "rebuild them with: ductile ledger replay\n")
		default:
			fmt.Fprintf(w, "OK: %d events, hash chain intact, projections match a fresh replay to seq %d\n", chain.Events, report.Checkpoint)
			printArchivesOK(w, archives)
		}
	}
	if !report.OK {
		return silent(exitFailure)
	}
	return nil
}

// compareWithReplay replays the log into a scratch file in the temp
// directory and compares projections. The scratch file is never in the
// state directory, which may be read-only or full.
func compareWithReplay(ctx context.Context, e *env, l *ledger.Ledger, progress func(int64)) (*projections.Mismatch, int64, error) {
	scratchPath, cleanup, err := scratchFile()
	if err != nil {
		return nil, 0, err
	}
	defer cleanup()
	scratch, err := ledger.Open(ctx, scratchPath, ledger.Options{Synchronous: "NORMAL", Logger: e.quietLogger()})
	if err != nil {
		return nil, 0, err
	}
	defer scratch.Close()
	m, err := projections.Compare(ctx, l, scratch, progress)
	if err != nil {
		return nil, 0, err
	}
	cp, err := projections.ReadCheckpoint(ctx, scratch)
	return m, cp, err
}

// scratchFile is a new file path in a new directory under the system temp
// directory ($TMPDIR, else /tmp), and the function that removes it.
func scratchFile() (string, func(), error) {
	d, err := os.MkdirTemp("", "ductile-verify-")
	if err != nil {
		return "", nil, fmt.Errorf("make scratch dir: %w", err)
	}
	return filepath.Join(d, "replay.db"), func() { os.RemoveAll(d) }, nil
}

func ledgerReplay(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	out, until, dry := c.String("out"), c.Int64("until"), c.Bool("dry-run")
	if until < 0 {
		return usagef("--until must be a positive seq")
	}
	if until != 0 && out == "" {
		return usagef("--until needs --out FILE: in place, projections always follow the whole log")
	}
	if out != "" {
		if _, err := os.Stat(out); err == nil {
			return conflictf("%s already exists: choose a new --out file or remove it first", out)
		}
	}
	// Into a new file the source is only read; in place it is written.
	var l *ledger.Ledger
	if out != "" {
		l, err = e.readLedger(c.Context)
	} else {
		l, err = e.openExistingLedger(c.Context)
	}
	if err != nil {
		return err
	}
	defer l.Close()
	// In place, daemon.ReplayInPlace holds the state directory's lock while
	// it reads the head and rebuilds (a dry run checks it is free).
	var replay daemon.Replay
	if out == "" {
		replay, err = daemon.ReplayInPlace(c.Context, e.stateDir, l, dry)
		var held *daemon.LockError
		if errors.As(err, &held) {
			return conflictf("process %d (ductile %s) is running on %s: stop it before replaying in place, or replay into a new file with --out", held.PID, held.Role, e.stateDir)
		}
		if err != nil {
			return err
		}
		until = replay.Until
	} else {
		head, err := l.LastSeq(c.Context)
		if err != nil {
			return err
		}
		if until == 0 || until > head {
			until = head
		}
	}
	result := map[string]any{"source": l.Path(), "until": until, "dry_run": dry}
	if out != "" {
		result["out"] = out
	}
	if dry {
		if c.Bool("json") {
			return printJSON(e.stdout, result)
		}
		where := "in place"
		if out != "" {
			where = "into " + out
		}
		fmt.Fprintf(e.stdout, "would replay %d events %s (run without --dry-run to do it)\n", until, where)
		return nil
	}
	cp := replay.Checkpoint
	if out != "" {
		copied := progress(e.stderr, c.Bool("json"), until, func(seq int64) string {
			return fmt.Sprintf("replayed %d/%d events…", seq, until)
		})
		if cp, err = replayInto(c.Context, e, l, out, until, copied); err != nil {
			return err
		}
	}
	result["checkpoint"] = cp
	if c.Bool("json") {
		return printJSON(e.stdout, result)
	}
	if out != "" {
		fmt.Fprintf(e.stdout, "wrote %s: the log up to seq %d and its projections (inspect it with --state-dir or sqlite3)\n", out, cp)
	} else {
		fmt.Fprintf(e.stdout, "rebuilt projections from %d events\n", cp)
	}
	return nil
}

// replayInto writes src's log up to until, and projections rebuilt from it,
// into a new ledger file out, and returns its checkpoint. It builds the
// ledger in a temporary file beside out and renames it into place only once
// complete and flushed, never over an existing file: an interrupted replay
// leaves no out (a killed one leaves its temporary file, .<out>.replay-*),
// and a failed one removes what it wrote.
func replayInto(ctx context.Context, e *env, src *ledger.Ledger, out string, until int64, progress func(int64)) (cp int64, err error) {
	dir := filepath.Dir(out)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("replay into %s: %w", out, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(out)+".replay-*")
	if err != nil {
		return 0, fmt.Errorf("replay into %s: %w", out, err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			for _, p := range append([]string{tmp}, ledger.SideFiles(tmp)...) {
				os.Remove(p)
			}
		}
	}()
	// No syncer: the file is flushed once, whole, before it is renamed.
	dst, err := ledger.Open(ctx, tmp, ledger.Options{Synchronous: "NORMAL", Logger: e.quietLogger()})
	if err != nil {
		return 0, err
	}
	if _, err = projections.CopyLog(ctx, src, dst, until, progress); err == nil {
		cp, err = projections.Rebuild(ctx, dst, until)
	}
	// The last connection to close copies the WAL into the file and removes it.
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if _, serr := os.Stat(tmp + "-wal"); serr == nil {
		return 0, fmt.Errorf("replay into %s: its write-ahead log was not merged into %s", out, tmp)
	}
	for _, p := range ledger.SideFiles(tmp) {
		os.Remove(p) // the doorbell its writer opened; no reader watches a copy being built
	}
	if err = syncPath(tmp); err != nil {
		return 0, fmt.Errorf("replay into %s: %w", out, err)
	}
	if err = renameNew(tmp, out); err != nil {
		return 0, fmt.Errorf("replay into %s: %w", out, err)
	}
	if err = syncPath(dir); err != nil {
		return 0, fmt.Errorf("replay into %s: %w", out, err)
	}
	return cp, nil
}

// renameNew renames from to to, failing if to exists (RENAME_NOREPLACE; a
// file system without it gets a plain rename after a check).
func renameNew(from, to string) error {
	err := renameNoReplace(from, to)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, serr := os.Stat(to); serr == nil {
			return fmt.Errorf("%s already exists", to)
		}
		return os.Rename(from, to)
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s appeared while the replay ran: choose a new --out file", to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// syncPath flushes a file or directory to disk.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func ledgerStats(c *cli.Context, e *env, l *ledger.Ledger) error {
	out, err := views.ReadLedgerStats(c.Context, l)
	if err != nil {
		return err
	}
	if h, err := daemon.Holder(e.stateDir); err == nil && h.Daemon() {
		out.Daemon, out.DaemonPID = true, h.PID
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	w, st := e.stdout, out.Stats
	fmt.Fprintf(w, "database     %s (%s, wal %s)\n", out.Database, humanBytes(out.FileBytes), humanBytes(out.WALBytes))
	fmt.Fprintf(w, "events       %d (seq %d..%d)\n", st.Events, st.FirstSeq, st.LastSeq)
	if st.Events > 0 {
		fmt.Fprintf(w, "recorded     %s .. %s\n", st.FirstRecordedAt, st.LastRecordedAt)
	}
	fmt.Fprintf(w, "streams      %d\n", out.Streams)
	fmt.Fprintf(w, "projector    checkpoint %d, lag %d events\n", out.Checkpoint, out.Lag)
	if out.Daemon {
		fmt.Fprintf(w, "daemon       running (pid %d)\n", out.DaemonPID)
	} else {
		fmt.Fprintf(w, "daemon       not running\n")
	}
	if len(out.Types) > 0 {
		fmt.Fprintf(w, "types:\n")
		for _, t := range out.Types {
			fmt.Fprintf(w, "  %-32s %d\n", t.Type, t.Count)
		}
	}
	for _, warning := range out.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warning)
	}
	return nil
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
