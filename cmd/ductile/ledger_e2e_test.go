package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

func TestLedgerTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stored := seed(t, dir, 15)
	// e2e/1: 1 4 7 10 13, e2e/2: 2 5 8 11 14, e2e/3: 3 6 9 12 15;
	// e2e.created: odd seqs, e2e.updated: even seqs.

	for _, tc := range []struct {
		name string
		args []string
		want []int64
	}{
		{"default is the last 10", nil, seqRange(6, 15, 1)},
		{"-n", []string{"-n", "3"}, seqRange(13, 15, 1)},
		{"--lines=", []string{"--lines=4"}, seqRange(12, 15, 1)},
		{"-n larger than the log", []string{"-n", "100"}, seqRange(1, 15, 1)},
		{"--from is inclusive", []string{"--from", "13"}, seqRange(13, 15, 1)},
		{"--from ignores -n", []string{"--from", "2", "-n", "3"}, seqRange(2, 15, 1)},
		{"--from 1", []string{"--from", "1"}, seqRange(1, 15, 1)},
		{"--from past the head", []string{"--from", "16"}, nil},
		{"--type", []string{"--type", "e2e.updated"}, seqRange(2, 14, 2)},
		{"--type -n", []string{"--type", "e2e.created", "-n", "3"}, []int64{11, 13, 15}},
		{"--stream", []string{"--stream", "e2e/2"}, seqRange(2, 14, 3)},
		{"--stream --from", []string{"--stream", "e2e/3", "--from", "7"}, []int64{9, 12, 15}},
		{"--type and --stream", []string{"--type", "e2e.created", "--stream", "e2e/1"}, []int64{1, 7, 13}},
		{"no match", []string{"--stream", "e2e/9"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"ledger", "tail", "--state-dir", dir}, tc.args...)

			// --json: one line per event, every field as stored.
			r := mustRun(t, nil, append(args, "--json")...)
			lines := parseTail(t, r.stdout)
			require.Equal(t, tc.want, seqsOf(lines))
			for _, l := range lines {
				require.Equal(t, wantLine(stored[l.Seq-1]), l)
			}

			// Plain: the same events, seq first.
			r = mustRun(t, nil, args...)
			var seqs []int64
			for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
				if line == "" {
					continue
				}
				f := strings.Fields(line)
				require.Len(t, f, 6, line)
				seq, err := strconv.ParseInt(f[0], 10, 64)
				require.NoError(t, err, line)
				ev := stored[seq-1]
				require.Equal(t, []string{f[1], f[2], f[3], f[4], f[5]}, []string{
					ev.RecordedAt.UTC().Format(ledger.TimeFormat), ev.Stream, "v" + strconv.FormatInt(ev.Version, 10), ev.Type, string(ev.Data),
				}, line)
				seqs = append(seqs, seq)
			}
			require.Equal(t, tc.want, seqs)
			require.Empty(t, r.stderr)
		})
	}

	t.Run("fields", func(t *testing.T) {
		t.Parallel()
		r := mustRun(t, nil, "ledger", "tail", "--json", "--from", "5", "-n", "1", "--state-dir", dir)
		lines := parseTail(t, r.stdout)
		require.NotEmpty(t, lines)
		l := lines[0]
		require.Equal(t, int64(5), l.Seq)
		require.Equal(t, "e2e/2", l.Stream)
		require.Equal(t, int64(2), l.Version)
		require.Equal(t, "e2e.created", l.Type)
		require.JSONEq(t, `{"n":5}`, string(l.Data))
		require.JSONEq(t, `{"actor":"e2e"}`, string(l.Meta))
		require.Len(t, l.Hash, 64)
		require.Len(t, l.RecordedAt, len(ledger.TimeFormat))
	})
}

func TestLedgerTailEmpty(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "fresh")
	mustRun(t, nil, "system", "migrate", "--state-dir", dir) // an empty ledger
	r := mustRun(t, nil, "ledger", "tail", "--state-dir", dir)
	require.Empty(t, r.stdout)
	r = mustRun(t, nil, "ledger", "tail", "--json", "--state-dir", dir)
	require.Empty(t, r.stdout)
}

func TestLedgerTailFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 15)

	// Given a follower that has printed the last 10 events,
	f := start(t, nil, "ledger", "tail", "--follow", "--json", "--state-dir", dir)
	_, i := f.waitLine(t, 0, func(s string) bool { return strings.HasPrefix(s, `{"seq":15,`) })
	require.Equal(t, 9, i, "the last 10 events come first")

	// when another process appends, it prints each new event, commit by commit
	// (single fsynced commits, as production appends are: nothing later comes
	// to wake the follower if it misses one),
	l := openLedgerSync(t, dir, "FULL")
	for _, seq := range []int64{16, 17} {
		seqs, err := l.Append(context.Background(), ledger.NewEvent{
			Stream: "follow/1", ExpectedVersion: ledger.AnyVersion, Type: "follow.appended", Data: map[string]int64{"seq": seq},
		})
		require.NoError(t, err)
		require.Equal(t, []int64{seq}, seqs)
		line, _ := f.waitLine(t, i+1, func(s string) bool { return strings.HasPrefix(s, fmt.Sprintf(`{"seq":%d,`, seq)) })
		lines := parseTail(t, line)
		require.Len(t, lines, 1)
		require.Equal(t, "follow/1", lines[0].Stream)
		require.Equal(t, "follow.appended", lines[0].Type)
		require.JSONEq(t, fmt.Sprintf(`{"seq":%d}`, seq), string(lines[0].Data))
		i++
	}

	all, _ := f.snapshot()
	require.Len(t, all, 12, "exactly the 10 recent events and the 2 new ones:\n%s", strings.Join(all, "\n"))
	require.Equal(t, seqRange(6, 17, 1), seqsOf(parseTail(t, strings.Join(all, "\n"))))

	// and SIGINT ends it with exit 0.
	stopFollower(t, f, syscall.SIGINT)
}

// stopFollower signals a `ledger tail --follow` and requires exit 0 and
// nothing on stderr, whenever the signal lands (idle or mid-read).
func stopFollower(t *testing.T, f *proc, sig syscall.Signal) {
	t.Helper()
	code := f.signal(t, sig)
	require.Equal(t, 0, code, "stderr: %s", f.stderr.String())
	require.Empty(t, f.stderr.String())
}

// TestLedgerTailFollowStopsMidRead stops a follower while it is still
// printing a long backlog: Ctrl-C on a follower is a normal way to end it.
func TestLedgerTailFollowStopsMidRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 20000
	seed(t, dir, n)
	f := start(t, nil, "ledger", "tail", "--follow", "--from", "1", "--state-dir", dir)
	f.waitLine(t, 0, func(string) bool { return true })
	stopFollower(t, f, syscall.SIGINT)
	// It did stop mid-read (here it stops after a few hundred lines).
	lines, _ := f.snapshot()
	require.Less(t, len(lines), n, "the whole backlog was printed before the signal: nothing was interrupted")
}

func TestLedgerTailFollowFilters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 3)
	f := start(t, nil, "ledger", "tail", "-f", "--type", "e2e.updated", "--state-dir", dir)
	// Seq 2 is the one e2e.updated event so far.
	f.waitLine(t, 0, func(s string) bool { return strings.HasPrefix(strings.TrimSpace(s), "2 ") })

	l := openLedger(t, dir)
	_, err := l.Append(context.Background(), fixtureEvent(5)) // seq 4: e2e.created, filtered out
	require.NoError(t, err)
	_, err = l.Append(context.Background(), fixtureEvent(6)) // seq 5: e2e.updated
	require.NoError(t, err)
	line, _ := f.waitLine(t, 1, func(string) bool { return true })
	require.True(t, strings.HasPrefix(strings.TrimSpace(line), "5 "), "the next line is seq 5, not the filtered seq 4: %q", line)

	all, _ := f.snapshot()
	require.Len(t, all, 2, strings.Join(all, "\n"))
	stopFollower(t, f, syscall.SIGTERM)
}

func TestLedgerVerifyFindsTheTamperedSeq(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 8)
	mustRun(t, nil, "ledger", "replay", "--state-dir", dir) // bring projections to seq 8

	// Given a clean ledger, verify passes.
	r := mustRun(t, nil, "ledger", "verify", "--state-dir", dir)
	require.Equal(t, "OK: 8 events, hash chain intact, projections match a fresh replay to seq 8\n", r.stdout)
	r = mustRun(t, nil, "ledger", "verify", "--json", "--state-dir", dir)
	var clean map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &clean), r.stdout)
	require.JSONEq(t, `true`, string(clean["ok"]))
	require.JSONEq(t, `{"ok":true,"events":8,"last_seq":8}`, string(clean["chain"]))
	require.JSONEq(t, `8`, string(clean["checkpoint"]))
	var head struct {
		Head    int64  `json:"head"`
		Problem string `json:"problem"`
	}
	require.NoError(t, json.Unmarshal(clean["head"], &head), "the head, compared with what was recorded of it")
	require.Equal(t, int64(8), head.Head)
	require.Empty(t, head.Problem)

	// When seq 5's data is changed behind the triggers' back,
	require.Equal(t, 1, runScript(t, dir, "tamper_event.sql", map[string]any{":seq": 5}), "the script recreates the trigger last")
	// (the fixture put the guard back)
	_, err := execSQL(t, dir, "UPDATE events SET data = '{}' WHERE seq = 1;", nil)
	require.ErrorContains(t, err, "events are append-only: UPDATE is not allowed")

	// then verify fails and names exactly that seq.
	r = ductile(t, nil, "ledger", "verify", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, "BROKEN at seq 5: content does not match its hash: the event was changed after it was written\n"+
		"events 1..4 verify; the ledger has been altered outside Ductile from seq 5 on.\n", r.stdout)
	r = ductile(t, nil, "ledger", "verify", "--json", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	var report struct {
		OK    bool `json:"ok"`
		Chain struct {
			OK      bool   `json:"ok"`
			Events  int64  `json:"events"`
			LastSeq int64  `json:"last_seq"`
			BadSeq  int64  `json:"bad_seq"`
			Problem string `json:"problem"`
		} `json:"chain"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report), r.stdout)
	require.False(t, report.OK)
	require.False(t, report.Chain.OK)
	require.Equal(t, int64(5), report.Chain.BadSeq)
	require.Equal(t, int64(4), report.Chain.Events, "events before the bad one")
	require.Equal(t, int64(4), report.Chain.LastSeq)
	require.Contains(t, report.Chain.Problem, "content does not match its hash")
	require.Empty(t, r.stderr, "--json prints no progress")
}

func TestLedgerVerifyFindsADriftedProjection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 8)
	// One job run to the end (no daemon: plugin run runs it itself) puts
	// rows in the job projections.
	var run struct {
		JobID string `json:"job_id"`
	}
	r := mustRun(t, nil, "plugin", "run", "echo", "--wait", "--json", "--state-dir", dir)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), r.stdout)
	events := stats(t, dir).Events
	require.Greater(t, events, int64(8))
	mustRun(t, nil, "ledger", "replay", "--state-dir", dir)

	// Given an intact chain but a job_queue row that disagrees with the log,
	require.Equal(t, 1, runScript(t, dir, "drift_job_queue.sql", map[string]any{":id": run.JobID}))

	// verify fails, names the projection and says how to fix it;
	r = ductile(t, nil, "ledger", "verify", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stdout, fmt.Sprintf(`hash chain OK (%d events), but projection "job_queue" differs from a fresh replay to seq %d`, events, events))
	// It shows the differing row both ways (the dump's field spelling is
	// the projection's business, so only the values are checked).
	var live, replayed string
	for _, line := range strings.Split(r.stdout, "\n") {
		if v, ok := strings.CutPrefix(line, "  live:     "); ok {
			live = v
		}
		if v, ok := strings.CutPrefix(line, "  replayed: "); ok {
			replayed = v
		}
	}
	require.Contains(t, live, run.JobID, r.stdout)
	require.Contains(t, live, `:101,`, r.stdout)
	require.Contains(t, replayed, run.JobID, r.stdout)
	require.Contains(t, replayed, `:1,`, r.stdout)
	require.True(t, strings.HasSuffix(r.stdout, "rebuild them with: ductile ledger replay\n"), r.stdout)
	r = ductile(t, nil, "ledger", "verify", "--json", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	var report struct {
		OK    bool `json:"ok"`
		Chain struct {
			OK     bool  `json:"ok"`
			Events int64 `json:"events"`
		} `json:"chain"`
		Mismatch *struct {
			Checkpoint int64  `json:"checkpoint"`
			Projection string `json:"projection"`
		} `json:"projection_mismatch"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report), r.stdout)
	require.False(t, report.OK)
	require.True(t, report.Chain.OK)
	require.Equal(t, events, report.Chain.Events)
	require.NotNil(t, report.Mismatch)
	require.Equal(t, "job_queue", report.Mismatch.Projection)
	require.Equal(t, events, report.Mismatch.Checkpoint)

	// and replay repairs it.
	r = mustRun(t, nil, "ledger", "replay", "--state-dir", dir)
	require.Equal(t, fmt.Sprintf("rebuilt projections from %d events\n", events), r.stdout)
	r = mustRun(t, nil, "ledger", "verify", "--state-dir", dir)
	require.Equal(t, fmt.Sprintf("OK: %d events, hash chain intact, projections match a fresh replay to seq %d\n", events, events), r.stdout)
}

func TestLedgerReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stored := seed(t, dir, 12)
	db := daemon.DBPath(dir)
	require.Equal(t, int64(0), stats(t, dir).Checkpoint, "seeded without a projector")

	// --dry-run changes nothing, in place or with --out.
	r := mustRun(t, nil, "ledger", "replay", "--dry-run", "--state-dir", dir)
	require.Equal(t, "would replay 12 events in place (run without --dry-run to do it)\n", r.stdout)
	out3 := filepath.Join(t.TempDir(), "dry", "ductile.db")
	r = mustRun(t, nil, "ledger", "replay", "--dry-run", "--json", "--out", out3, "--until", "4", "--state-dir", dir)
	require.JSONEq(t, fmt.Sprintf(`{"source":%q,"until":4,"dry_run":true,"out":%q}`, db, out3), r.stdout)
	require.NoFileExists(t, out3)
	require.NoDirExists(t, filepath.Dir(out3))
	require.Equal(t, int64(0), stats(t, dir).Checkpoint, "--dry-run moved the checkpoint")

	// In place, projections follow the whole log.
	r = mustRun(t, nil, "ledger", "replay", "--json", "--state-dir", dir)
	require.JSONEq(t, fmt.Sprintf(`{"source":%q,"until":12,"dry_run":false,"checkpoint":12}`, db), r.stdout)
	s := stats(t, dir)
	require.Equal(t, int64(12), s.Checkpoint)
	require.Equal(t, int64(3), s.Streams)

	// --until without --out is a usage error.
	r = ductile(t, nil, "ledger", "replay", "--until", "5", "--state-dir", dir)
	require.Equal(t, 2, r.code, "%s", r)
	require.Equal(t, "ductile: --until needs --out FILE: in place, projections always follow the whole log\n", r.stderr)

	// --out --until writes a new ledger holding the log to that point.
	dir2 := filepath.Join(t.TempDir(), "as-of-5")
	out := daemon.DBPath(dir2)
	r = mustRun(t, nil, "ledger", "replay", "--out", out, "--until", "5", "--state-dir", dir)
	require.Equal(t, fmt.Sprintf("wrote %s: the log up to seq 5 and its projections (inspect it with --state-dir or sqlite3)\n", out), r.stdout)
	entries, err := os.ReadDir(dir2)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the copy alone, none of the files its build kept beside it: %v", entries)
	s = stats(t, dir2)
	require.Equal(t, int64(5), s.Events)
	require.Equal(t, int64(5), s.LastSeq)
	require.Equal(t, int64(5), s.Checkpoint)
	require.Equal(t, int64(0), s.Lag)
	require.Equal(t, int64(3), s.Streams)
	r = mustRun(t, nil, "ledger", "verify", "--state-dir", dir2)
	require.Equal(t, "OK: 5 events, hash chain intact, projections match a fresh replay to seq 5\n", r.stdout)
	// The copy is the same events, hashes included.
	r = mustRun(t, nil, "ledger", "tail", "--json", "--from", "1", "--state-dir", dir2)
	lines := parseTail(t, r.stdout)
	require.Len(t, lines, 5)
	for _, l := range lines {
		require.Equal(t, wantLine(stored[l.Seq-1]), l)
	}

	// An existing --out file is never overwritten.
	before, err := os.ReadFile(out)
	require.NoError(t, err)
	r = ductile(t, nil, "ledger", "replay", "--out", out, "--until", "7", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, fmt.Sprintf("ductile: %s already exists: choose a new --out file or remove it first\n", out), r.stderr)
	after, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, before, after)

	// --out without --until copies everything, and so does --until past the head.
	for _, extra := range [][]string{nil, {"--until", "99"}} {
		args := append([]string{"ledger", "replay", "--json", "--out", filepath.Join(t.TempDir(), "all.db"), "--state-dir", dir}, extra...)
		r = mustRun(t, nil, args...)
		var res struct {
			Until      int64 `json:"until"`
			Checkpoint int64 `json:"checkpoint"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), "%q: %s", extra, r)
		require.Equal(t, int64(12), res.Until, "%q", extra)
		require.Equal(t, int64(12), res.Checkpoint, "%q", extra)
	}
}

// ledger replay in place under a running daemon is refused, dry run
// included (it would race the daemon's own projector; the real run holds
// the state directory's lock while it rebuilds); into a new file it is fine.
func TestLedgerReplayInPlaceNeedsTheDaemonStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 5)
	d, _ := startDaemon(t, dir)

	for _, args := range [][]string{{}, {"--dry-run"}} {
		r := ductile(t, nil, append([]string{"ledger", "replay", "--state-dir", dir}, args...)...)
		require.Equal(t, 1, r.code, "%s", r)
		require.Contains(t, r.stderr, "(ductile daemon) is running on")
		require.Contains(t, r.stderr, "stop it before replaying in place, or replay into a new file with --out")
	}
	mustRun(t, nil, "ledger", "replay", "--state-dir", dir, "--out", filepath.Join(t.TempDir(), "copy.db"))

	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
	mustRun(t, nil, "ledger", "replay", "--state-dir", dir, "--dry-run")
	mustRun(t, nil, "ledger", "replay", "--state-dir", dir)
}

func TestLedgerStats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stored := seed(t, dir, 6)
	db := daemon.DBPath(dir)

	// Before any projection: the log is counted from the events themselves,
	// the projector has applied nothing.
	s := stats(t, dir)
	require.Equal(t, int64(6), s.Events)
	require.Equal(t, int64(1), s.FirstSeq)
	require.Equal(t, int64(6), s.LastSeq)
	require.Equal(t, int64(0), s.Checkpoint)
	require.Equal(t, int64(6), s.Lag)
	require.Equal(t, int64(3), s.Streams)
	require.Len(t, s.Types, 2)
	require.False(t, s.Daemon)
	require.Zero(t, s.DaemonPID)
	require.Equal(t, db, s.Database)
	require.Equal(t, stored[0].RecordedAt.UTC().Format(ledger.TimeFormat), s.First)
	require.Equal(t, stored[5].RecordedAt.UTC().Format(ledger.TimeFormat), s.Last)

	mustRun(t, nil, "ledger", "replay", "--state-dir", dir)
	s = stats(t, dir)
	require.Equal(t, int64(6), s.Checkpoint)
	require.Equal(t, int64(0), s.Lag)
	require.Equal(t, int64(3), s.Streams)
	require.Len(t, s.Types, 2)
	require.Equal(t, "e2e.created", s.Types[0].Type)
	require.Equal(t, int64(3), s.Types[0].Count)
	require.Equal(t, "e2e.updated", s.Types[1].Type)
	require.Equal(t, int64(3), s.Types[1].Count)

	r := mustRun(t, nil, "ledger", "stats", "--state-dir", dir)
	for _, want := range []string{
		"database     " + db + " (",
		"events       6 (seq 1..6)\n",
		fmt.Sprintf("recorded     %s .. %s\n", s.First, s.Last),
		"streams      3\n",
		"projector    checkpoint 6, lag 0 events\n",
		"daemon       not running\n",
		"types:\n",
		fmt.Sprintf("  %-32s %d\n", "e2e.created", 3),
		fmt.Sprintf("  %-32s %d\n", "e2e.updated", 3),
	} {
		require.Contains(t, r.stdout, want)
	}
	require.Equal(t, 9, strings.Count(r.stdout, "\n"), r.stdout)

	// With a daemon running, plain stats names its PID.
	d, _ := startDaemon(t, dir)
	r = mustRun(t, nil, "ledger", "stats", "--state-dir", dir)
	require.Contains(t, r.stdout, fmt.Sprintf("daemon       running (pid %d)\n", d.pid()))
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
}
