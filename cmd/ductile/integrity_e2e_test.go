package main_test

// End-to-end tests of the ledger's integrity and of what read-only commands
// may touch: truncation, read-only opens, the lock's holder, replay copies.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/migrations"
)

// A lock file still names the daemon that last held it after that daemon
// has exited. Whoever takes the flock next rewrites it only a moment later,
// and a process that takes the flock without writing (flock(1) in a backup
// script) never does: in between, the dead daemon must not be taken for the
// running one.
func TestStaleLockFileNamesNoDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, started := startDaemon(t, dir)
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
	b, err := os.ReadFile(daemon.LockPath(dir))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(started.PID)+" daemon\n", string(b), "the file names the daemon that has gone")

	// This process holds the flock without rewriting the file.
	f, err := os.OpenFile(daemon.LockPath(dir), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))

	r := mustRun(t, nil, "plugin", "run", "echo", "--dry-run", "--json", "--state-dir", dir)
	var run struct {
		RanBy string `json:"ran_by"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), r.stdout)
	require.Equal(t, "cli", run.RanBy, "no daemon runs: the job would not be left to one")
	s := stats(t, dir)
	require.False(t, s.Daemon, "ledger stats names no daemon")
	require.Zero(t, s.DaemonPID)
}

// Commands that only read, pointed at a state directory that does not exist
// (a mistyped --state-dir), create nothing: those that need the ledger say
// there is none and where they looked (exit 1); plugin list and config check
// need none and work. So do the commands that change a job or the
// projections already there (job cancel, job retry, ledger replay). Only a
// command that adds work creates the state directory, and private (0700).
func TestReadOnlyCommandsOnAMissingLedgerCreateNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "mistyped")
	db := daemon.DBPath(dir)

	for _, args := range [][]string{
		{"queue"}, {"queue", "--json"}, {"job", "list"}, {"job", "list", "--json"},
		{"job", "inspect", "01a1fea8-21ea-74fd-b3f5-0601dd7927b8"}, {"job", "logs", "01a1fea8-21ea-74fd-b3f5-0601dd7927b8"},
		{"ledger", "stats"}, {"ledger", "stats", "--json"}, {"ledger", "verify"}, {"ledger", "tail"},
		{"ledger", "replay", "--out", filepath.Join(t.TempDir(), "copy.db")},
		// Commands that change what is there create nothing either.
		{"job", "cancel", "01a1fea8-21ea-74fd-b3f5-0601dd7927b8"}, {"job", "retry", "01a1fea8-21ea-74fd-b3f5-0601dd7927b8"},
		{"ledger", "replay"},
	} {
		r := ductile(t, nil, append(args, "--state-dir", dir)...)
		require.Equal(t, 1, r.code, "%q: %s", args, r)
		require.Contains(t, r.stderr, "no ledger at "+db+": nothing has run on the state directory "+dir+" yet", "%q", args)
		require.Empty(t, r.stdout, "%q", args)
	}
	r := mustRun(t, nil, "plugin", "list", "--json", "--state-dir", dir)
	var list struct {
		Plugins []struct {
			Name string `json:"name"`
			Dir  string `json:"dir"`
		} `json:"plugins"`
		Skipped []string `json:"skipped"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list), r.stdout)
	require.Len(t, list.Plugins, 3, r.stdout) // the bundled echo, http and notify
	for i, name := range []string{"echo", "http", "notify"} {
		require.Equal(t, name, list.Plugins[i].Name)
		require.Equal(t, filepath.Join(dir, "plugins", name), list.Plugins[i].Dir, "where the daemon unpacks and runs it")
	}
	require.Empty(t, list.Skipped)
	r = mustRun(t, nil, "config", "check", "--state-dir", dir)
	require.Contains(t, r.stdout, "plugins: [echo http notify]")
	require.NoDirExists(t, dir, "a command that only reads created the state directory")

	// A command that writes creates it, private.
	mustRun(t, nil, "plugin", "run", "echo", "--state-dir", dir)
	for _, d := range []string{dir, filepath.Join(dir, "plugins")} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
	fi, err := os.Stat(db)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), db)
}

// Commands that only read work on a ledger that cannot be written, and
// write nothing: no migration, no scratch file in the state directory, no
// -wal or -shm beside the database. The directory and the database are made
// read-only as a read-only mount would be: with chattr +i, which stops root
// too, when the test runs as root (file permissions do not); else with
// chmod. What the test proves: every command below succeeds where any
// write fails, and the directory's entries and the database's bytes and
// mtime are unchanged afterwards.
func TestReadOnlyCommandsWorkOnAReadOnlyLedger(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	var run struct {
		JobID string `json:"job_id"`
	}
	r := mustRun(t, nil, "plugin", "run", "echo", "--json", "--state-dir", dir)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), r.stdout)
	before := snapshotDir(t, dir)
	require.NotContains(t, before, "ductile.db-wal", "the last writer to close removed its WAL")
	makeReadOnly(t, dir)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "list", "--json"}, run.JobID},
		{[]string{"job", "inspect", run.JobID}, "succeeded"},
		{[]string{"job", "logs", run.JobID}, "echo poll"},
		{[]string{"queue", "--json"}, `"queued": 0`},
		{[]string{"ledger", "stats"}, "projector    checkpoint"},
		{[]string{"ledger", "verify"}, "OK: "},
		{[]string{"ledger", "tail"}, "job.succeeded"},
	} {
		r := mustRun(t, nil, append(tc.args, "--state-dir", dir)...)
		require.Contains(t, r.stdout, tc.want, "%q", tc.args)
	}
	require.Equal(t, before, snapshotDir(t, dir), "the state directory changed")

	// A command that writes fails, and says why.
	r = ductile(t, nil, "job", "cancel", run.JobID, "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, before, snapshotDir(t, dir), "the state directory changed")
}

// A read-only state directory whose ledger has a -wal but no -shm (copied
// from a running machine, say) cannot be read by SQLite, which would have to
// create the -shm: the error says so and what to do, instead of SQLite's
// bare "unable to open database file".
func TestReadOnlyLedgerWithAWALButNoSHM(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := daemon.DBPath(dir)
	l, err := ledger.Open(ctx, db, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	_, err = l.Append(ctx, fixtureEvent(1))
	require.NoError(t, err)
	wal, err := os.ReadFile(db + "-wal")
	require.NoError(t, err)
	require.NotEmpty(t, wal, "the append is in the WAL while the ledger is open")
	require.NoError(t, l.Close())
	require.NoError(t, os.WriteFile(db+"-wal", wal, 0o600))
	require.NoFileExists(t, db+"-shm", "closing the ledger removed it")
	makeReadOnly(t, dir)

	r := ductile(t, nil, "job", "list", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "the ledger has a -wal file but no -shm, and its directory "+dir+" cannot be written")
}

// snapshotDir is every entry of dir with its size, mode, mtime and a hash of
// its content.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		sum := "dir"
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		out[e.Name()] = fmt.Sprintf("%d %v %d %s", fi.Size(), fi.Mode(), fi.ModTime().UnixNano(), sum)
	}
	return out
}

// makeReadOnly makes dir and the files directly in it unwritable for this
// process, undone at the test's end: chattr +i when running as root, whom
// permissions do not stop; chmod otherwise. It skips the test if chattr is
// not available.
func makeReadOnly(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if os.Geteuid() != 0 {
		for _, f := range files {
			require.NoError(t, os.Chmod(f, 0o444))
		}
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		return
	}
	paths := append(files, dir)
	if out, err := exec.Command("chattr", append([]string{"+i"}, paths...)...).CombinedOutput(); err != nil {
		t.Skipf("running as root, and chattr +i is not available to make %s read-only for root: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		out, err := exec.Command("chattr", append([]string{"-i"}, paths...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	})
	require.Error(t, os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600), "the directory is still writable")
}

// Commands that only read do not migrate: on a ledger whose schema is older
// than the binary's, they say so and what to run.
func TestReadOnlyCommandsSayWhenTheSchemaIsBehind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 3)
	// As if the newest migration had not been applied yet.
	_, err := execSQL(t, dir, "DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version);", nil)
	require.NoError(t, err)
	latest := migrations.Latest()
	for _, args := range [][]string{{"job", "list"}, {"queue"}, {"ledger", "stats"}, {"ledger", "verify"}} {
		r := ductile(t, nil, append(args, "--state-dir", dir)...)
		require.Equal(t, 1, r.code, "%q: %s", args, r)
		require.Equal(t, fmt.Sprintf("ductile: the ledger %s is at schema version %d and this binary reads version %d: it needs migrating: "+
			"run ductile system migrate --state-dir %s (or start the daemon, which migrates), then this again\n",
			daemon.DBPath(dir), latest-1, latest, dir), r.stderr, "%q", args)
	}
}

// ledger replay --out builds the copy in a temporary file and renames it
// into place once complete: killed halfway (SIGKILL, once its progress
// shows it is copying), it leaves no FILE behind, and a later replay into
// the same FILE works.
func TestKilledReplayLeavesNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const events = 100_000 // the copy reports progress every 65,536 events
	seed(t, dir, events)
	outDir := t.TempDir()
	out := filepath.Join(outDir, "ductile.db")

	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ductileBin, "ledger", "replay", "--out", out, "--state-dir", dir)
	cmd.Env = cleanEnv(t)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	var progress string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "replayed ") {
			progress = sc.Text()
			break
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.NotEmpty(t, progress, "the replay printed no progress before it ended")
	require.Equal(t, -1, cmd.ProcessState.ExitCode(), "killed mid-replay (after %q)", progress)
	require.NoFileExists(t, out, "a killed replay left a partial copy")

	r := mustRun(t, nil, "ledger", "replay", "--json", "--out", out, "--state-dir", dir)
	require.Contains(t, r.stdout, fmt.Sprintf(`"checkpoint": %d`, events))
	s := stats(t, outDir)
	require.Equal(t, int64(events), s.Events)
	require.Equal(t, int64(events), s.Checkpoint)
}

// A replay into a new file that fails (here, the source's chain is broken
// at seq 5) leaves neither FILE nor its temporary file behind.
func TestFailedReplayLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed(t, dir, 8)
	require.Equal(t, 1, runScript(t, dir, "tamper_event.sql", map[string]any{":seq": 5}))
	outDir := t.TempDir()
	r := ductile(t, nil, "ledger", "replay", "--out", filepath.Join(outDir, "ductile.db"), "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "import event 5: content does not match its hash")
	entries, err := os.ReadDir(outDir)
	require.NoError(t, err)
	require.Empty(t, entries, "a failed replay left files behind")
}

// Deleting the newest events (the triggers dropped) leaves a chain that
// still verifies. ledger verify names the truncation as such and does not
// advise ledger replay; ledger stats warns of the negative lag; the daemon,
// and any other writer, refuses the ledger until --allow-damaged-ledger
// accepts the loss, after which everything is consistent again.
func TestTruncatedLedgerIsNamedAndRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, _ := startDaemon(t, dir)
	var run struct {
		JobID string `json:"job_id"`
	}
	for range 3 {
		r := mustRun(t, nil, "plugin", "run", "echo", "--wait", "--json", "--state-dir", dir)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), r.stdout)
	}
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
	before := stats(t, dir)
	require.Equal(t, before.LastSeq, before.Checkpoint)
	head := before.LastSeq
	witness := ledger.WitnessPath(daemon.DBPath(dir))
	require.FileExists(t, witness)

	// Remove the end of the last job: its start, success and fact. (Its
	// enqueue is left, so the job is queued again once the loss is accepted.)
	keep := head - 3
	runScript(t, dir, "truncate_events.sql", map[string]any{":seq": keep})

	r := ductile(t, nil, "ledger", "verify", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, r.stdout)
	require.Regexp(t, fmt.Sprintf(`^TRUNCATED: the ledger ends at seq %d but seq %d \(hash [0-9a-f]{16}…\) was recorded by the head witness %s: events were removed$`,
		keep, head, regexp.QuoteMeta(witness)), lines[0])
	require.Equal(t, fmt.Sprintf("events 1..%d verify, but the events after seq %d were removed outside Ductile; the projections cannot bring them back.", keep, keep), lines[1])
	require.Equal(t, "restore the ledger from a backup, or go on without them with: ductile system start --allow-damaged-ledger", lines[2])
	require.NotContains(t, r.stdout, "ledger replay")
	r = ductile(t, nil, "ledger", "verify", "--json", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	var report struct {
		OK   bool `json:"ok"`
		Head struct {
			Head      int64  `json:"head"`
			Truncated bool   `json:"truncated"`
			Problem   string `json:"problem"`
		} `json:"head"`
		Mismatch any `json:"projection_mismatch"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report), r.stdout)
	require.False(t, report.OK)
	require.True(t, report.Head.Truncated)
	require.Equal(t, keep, report.Head.Head)
	require.Equal(t, strings.TrimPrefix(lines[0], "TRUNCATED: "), report.Head.Problem)
	require.Nil(t, report.Mismatch, "projections are not compared with a log that lost events")

	r = mustRun(t, nil, "ledger", "stats", "--state-dir", dir)
	require.Contains(t, r.stdout, fmt.Sprintf("projector    checkpoint %d, lag -3 events\n", head))
	require.Contains(t, r.stdout, fmt.Sprintf("WARNING: the projector's checkpoint (seq %d) is past the log's head (seq %d): events were removed from the ledger (see: ductile ledger verify)\n", head, keep))
	s := stats(t, dir)
	require.Equal(t, int64(-3), s.Lag)

	// Every writer refuses it, naming the flag that accepts it; nothing is appended.
	for _, args := range [][]string{{"system", "start"}, {"plugin", "run", "echo"}, {"job", "cancel", run.JobID}} {
		r := ductile(t, nil, append(args, "--state-dir", dir)...)
		require.Equal(t, 1, r.code, "%q: %s", args, r)
		require.Contains(t, r.stderr, "ductile: the ledger is damaged: "+daemon.DBPath(dir)+": "+report.Head.Problem, "%q", args)
		require.Contains(t, r.stderr, "accept the damage and go on with: ductile system start --allow-damaged-ledger)", "%q", args)
	}
	require.Equal(t, keep, stats(t, dir).LastSeq)

	// Accepted, the daemon starts, rebuilds the projections from what is
	// left, runs jobs, and records the new head: all is consistent again.
	d = start(t, nil, "system", "start", "--allow-damaged-ledger", "--state-dir", dir)
	d.waitLine(t, 0, messageIs("rebuilt the projections from the damaged ledger as it is"))
	d.waitLine(t, 0, messageIs("ductile started"))
	mustRun(t, nil, "plugin", "run", "echo", "--wait", "--state-dir", dir)
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
	after := stats(t, dir)
	require.Greater(t, after.LastSeq, keep)
	require.Empty(t, after.Warnings)
	r = mustRun(t, nil, "ledger", "verify", "--state-dir", dir)
	require.Equal(t, fmt.Sprintf("OK: %d events, hash chain intact, projections match a fresh replay to seq %d\n", after.LastSeq, after.LastSeq), r.stdout)
	d, _ = startDaemon(t, dir)
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
}
