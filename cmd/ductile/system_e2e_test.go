package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/migrations"
)

func TestSystemStartStopsCleanlyOnSignal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig    syscall.Signal
		reason string
		// stateDir returns the state directory under a fresh temp dir.
		stateDir func(tmp string) string
	}{
		// An existing, empty directory.
		{syscall.SIGTERM, "terminated signal received", func(tmp string) string { return tmp }},
		// A directory that does not exist yet: the daemon creates it.
		{syscall.SIGINT, "interrupt signal received", func(tmp string) string { return filepath.Join(tmp, "new", "state") }},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := tc.stateDir(t.TempDir())

			// Given no config at all and an empty state dir, when the daemon starts,
			d, started := startDaemon(t, dir)

			// then it says so in a JSON line,
			require.Equal(t, "ductile started", started.Message)
			require.Equal(t, "INFO", started.Level)
			require.Equal(t, "daemon", started.Component)
			require.Equal(t, dir, started.StateDir)
			require.Equal(t, d.pid(), started.PID)
			require.Equal(t, int64(1), started.Head, "its one event: config.applied, what it loaded")
			ts, err := time.Parse(time.RFC3339Nano, started.Timestamp)
			require.NoError(t, err)
			require.WithinDuration(t, time.Now(), ts, time.Minute)
			require.FileExists(t, daemon.DBPath(dir))
			pid, err := os.ReadFile(daemon.LockPath(dir))
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(d.pid())+" daemon\n", string(pid), "the lock file holds the daemon's PID and role")

			// and when it gets the signal, it says why it stops and exits 0 promptly.
			begin := time.Now()
			require.Equal(t, 0, d.signal(t, tc.sig), "stderr: %s", d.stderr.String())
			t.Logf("%v: exited %v after the signal", tc.sig, time.Since(begin).Round(time.Millisecond))
			line, _ := d.waitLine(t, 0, messageIs("ductile stopping"))
			var stopping logLine
			require.NoError(t, json.Unmarshal([]byte(line), &stopping))
			require.Equal(t, "daemon", stopping.Component)
			require.Equal(t, tc.reason, stopping.Reason)
			// Nothing on stderr at INFO level, but the API's absence when
			// its default address was taken (another daemon of these
			// parallel tests has it): that is said on the terminal too.
			wantStderr := ""
			if lines, _ := d.snapshot(); slices.ContainsFunc(lines, messageIs("api: its default address is not free: running without the HTTP API")) {
				wantStderr = "ductile: running WITHOUT the HTTP API: its default address 127.0.0.1:8080 is not free"
			}
			if wantStderr == "" {
				require.Empty(t, d.stderr.String(), "nothing on stderr at INFO level")
			} else {
				require.Equal(t, 1, strings.Count(d.stderr.String(), "\n"), d.stderr.String())
				require.True(t, strings.HasPrefix(d.stderr.String(), wantStderr), d.stderr.String())
			}

			// Every line it logged is JSON with the spec's keys.
			lines, _ := d.snapshot()
			for _, line := range lines {
				var keys map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &keys), "not a JSON line: %s", line)
				for _, k := range []string{"timestamp", "level", "message", "component"} {
					require.Contains(t, keys, k, "line: %s", line)
				}
			}

			// The lock went with it.
			require.False(t, stats(t, dir).Daemon)
		})
	}
}

func TestSystemStartTakesTheStateDirLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, _ := startDaemon(t, dir)

	// Given a running daemon, a second one on the same state dir fails at
	// once, naming the lock file and the holder.
	r := ductile(t, nil, "system", "start", "--state-dir", dir)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, fmt.Sprintf("ductile: another ductile daemon is running on this state directory: "+
		"process %d holds %s (stop it, or use another --state-dir)\n", first.pid(), daemon.LockPath(dir)), r.stderr)
	require.Empty(t, r.stdout, "the loser must not log that it started")
	s := stats(t, dir)
	require.True(t, s.Daemon)
	require.Equal(t, first.pid(), s.DaemonPID, "the loser did not overwrite the holder's PID")

	// Once the first stops, a new one starts fine.
	require.Equal(t, 0, first.signal(t, syscall.SIGTERM))
	second, _ := startDaemon(t, dir)
	require.Equal(t, second.pid(), stats(t, dir).DaemonPID)

	// A daemon killed with SIGKILL cannot clean up; the kernel still drops its
	// flock, so the next one starts without manual help.
	require.Equal(t, -1, second.signal(t, syscall.SIGKILL))
	require.Equal(t, syscall.SIGKILL, second.cmd.ProcessState.Sys().(syscall.WaitStatus).Signal())
	third, started := startDaemon(t, dir)
	require.Equal(t, third.pid(), started.PID)
	s = stats(t, dir)
	require.True(t, s.Daemon)
	require.Equal(t, third.pid(), s.DaemonPID)
	require.Equal(t, 0, third.signal(t, syscall.SIGTERM))
}

func TestDaemonProjectsOtherProcessesAppends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, _ := startDaemon(t, dir)

	// Given a running daemon, when another process appends N events, in many
	// small commits and one large one,
	// (after the daemon's own config.applied, seq 1),
	const singles, batch = 60, 140
	const n = 1 + singles + batch
	l := openLedger(t, dir)
	ctx := context.Background()
	for i := 1; i <= singles; i++ {
		_, err := l.Append(ctx, fixtureEvent(i))
		require.NoError(t, err)
	}
	events := make([]ledger.NewEvent, 0, batch)
	for i := singles + 1; i < n; i++ {
		events = append(events, fixtureEvent(i))
	}
	_, err := l.Append(ctx, events...)
	require.NoError(t, err)
	appended := time.Now()

	// then the daemon's projector catches up with all of them on its own.
	s := waitCheckpoint(t, d, dir, n)
	t.Logf("projector reached seq %d within %v of the last append (as observed through ledger stats)",
		n, time.Since(appended).Round(time.Millisecond))
	require.Equal(t, int64(n), s.Events)
	require.Equal(t, int64(n), s.LastSeq)
	require.Equal(t, int64(0), s.Lag)
	require.Equal(t, int64(4), s.Streams, "system and the fixture's three")
	require.Len(t, s.Types, 3)
	require.Equal(t, "config.applied", s.Types[0].Type)
	require.Equal(t, int64(1), s.Types[0].Count)
	require.Equal(t, "e2e.created", s.Types[1].Type)
	require.Equal(t, int64((n-1)/2), s.Types[1].Count)
	require.Equal(t, "e2e.updated", s.Types[2].Type)
	require.Equal(t, int64((n-1)/2), s.Types[2].Count)
	require.True(t, s.Daemon)
	require.Equal(t, d.pid(), s.DaemonPID)

	// Each single fsynced commit (what a production process makes) is seen
	// on its own, without a later commit to wake the projector. This caught
	// a lost wake-up: the WAL write that woke the daemon came before the
	// commit was visible to readers, and nothing woke it again.
	full := openLedgerSync(t, dir, "FULL")
	for i := n + 1; i <= n+5; i++ {
		_, err := full.Append(ctx, fixtureEvent(i-1))
		require.NoError(t, err)
		appended := time.Now()
		waitCheckpoint(t, d, dir, int64(i))
		t.Logf("single FULL append %d projected within %v", i, time.Since(appended).Round(time.Millisecond))
	}
	const total = n + 5

	// What it projected is exactly a fresh replay.
	r := mustRun(t, nil, "ledger", "verify", "--state-dir", dir)
	require.Equal(t, fmt.Sprintf("OK: %d events, hash chain intact, projections match a fresh replay to seq %d\n", total, total), r.stdout)

	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))
	// A restarted daemon reports the head: what it found, and its own config.applied.
	d2, started := startDaemon(t, dir)
	require.Equal(t, int64(total+1), started.Head)
	require.Equal(t, 0, d2.signal(t, syscall.SIGINT))
}

// waitCheckpoint polls `ledger stats --json` until the projector checkpoint
// is seq, and fails with the daemon's output if it is not within waitTimeout.
func waitCheckpoint(t *testing.T, d *proc, dir string, seq int64) statsJSON {
	t.Helper()
	var s statsJSON
	waitFor(t, waitTimeout, fmt.Sprintf("projector checkpoint %d", seq), func() bool {
		s = stats(t, dir)
		return s.Checkpoint == seq
	}, func() string { return fmt.Sprintf("projector checkpoint %d; the daemon: %s", s.Checkpoint, d.kill()) })
	return s
}

func TestSystemMigrate(t *testing.T) {
	t.Parallel()
	latest := latestMigration(t)

	dir := t.TempDir()
	db := daemon.DBPath(dir)

	// A dry run on a new database says what it would do and does not do it.
	r := mustRun(t, nil, "system", "migrate", "--dry-run", "--state-dir", dir)
	require.Equal(t, fmt.Sprintf("would migrate %s from version 0 to %d (run without --dry-run to apply)\n", db, latest), r.stdout)
	r = mustRun(t, nil, "system", "migrate", "--json", "--dry-run", "--state-dir", dir)
	require.JSONEq(t, fmt.Sprintf(`{"database":%q,"version_before":0,"version":0,"latest":%d,"dry_run":true}`, db, latest), r.stdout)
	current, _, err := migrations.Status(context.Background(), db)
	require.NoError(t, err)
	require.Equal(t, int64(0), current, "--dry-run applied a migration")

	// Then it migrates, and afterwards there is nothing to do.
	r = mustRun(t, nil, "system", "migrate", "--json", "--state-dir", dir)
	require.JSONEq(t, fmt.Sprintf(`{"database":%q,"version_before":0,"version":%d,"latest":%d,"dry_run":false}`, db, latest, latest), r.stdout)
	r = mustRun(t, nil, "system", "migrate", "--state-dir", dir)
	require.Equal(t, fmt.Sprintf("%s is up to date (schema version %d)\n", db, latest), r.stdout)
	r = mustRun(t, nil, "system", "migrate", "--dry-run", "--json", "--state-dir", dir)
	require.JSONEq(t, fmt.Sprintf(`{"database":%q,"version_before":%d,"version":%d,"latest":%d,"dry_run":true}`, db, latest, latest, latest), r.stdout)

	// Plain output of a real migration, into a state dir that does not exist yet.
	dir2 := filepath.Join(t.TempDir(), "new", "state")
	r = mustRun(t, nil, "system", "migrate", "--state-dir", dir2)
	require.Equal(t, fmt.Sprintf("migrated %s from version 0 to %d\n", daemon.DBPath(dir2), latest), r.stdout)
	// The result is a usable ledger.
	s := stats(t, dir2)
	require.Equal(t, int64(0), s.Events)
}

// latestMigration is the version of the newest embedded migration file.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	entries, err := migrations.FS.ReadDir(".")
	require.NoError(t, err)
	var latest int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		require.True(t, ok, e.Name())
		v, err := strconv.ParseInt(num, 10, 64)
		require.NoError(t, err, e.Name())
		latest = max(latest, v)
	}
	require.NotZero(t, latest)
	return latest
}
