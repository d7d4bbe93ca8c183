package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// backupJSON is what ledger backup --json prints.
type backupJSON struct {
	DryRun bool   `json:"dry_run"`
	Source string `json:"source"`
	Backup struct {
		Path     string `json:"path"`
		Head     int64  `json:"head_seq"`
		HeadHash string `json:"head_hash"`
		Pages    int    `json:"pages"`
		Bytes    int64  `json:"bytes"`
	} `json:"backup"`
	Seconds  float64 `json:"seconds"`
	Verified *struct {
		OK    bool `json:"ok"`
		Chain struct {
			OK      bool  `json:"ok"`
			Events  int64 `json:"events"`
			LastSeq int64 `json:"last_seq"`
		} `json:"chain"`
		Checkpoint int64 `json:"checkpoint"`
	} `json:"verified"`
}

// roots enqueues n emit jobs ({"n":i}) through the commands package on l
// from a few goroutines, standing in for clients of a running daemon. Each
// id is stored in ids once its enqueue returned (acknowledged: durable);
// acked, if set, is called with it. The returned function waits for all.
func enqueueRoots(t *testing.T, w *jobWorld, l *ledger.Ledger, n int, acked func(id string)) (ids []string, wait func() error) {
	t.Helper()
	cfg, err := config.Load(w.config)
	require.NoError(t, err)
	const enqueuers = 4
	ids = make([]string, n)
	errs := make([]error, enqueuers)
	var wg sync.WaitGroup
	for g := range enqueuers {
		wg.Go(func() {
			for i := g; i < n; i += enqueuers {
				enq := commands.JobFor(cfg, "emit", "poll", events.ActorCLI)
				enq.Payload = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
				enq.Now = time.Now()
				res, err := commands.EnqueueJob(context.Background(), l, enq)
				if err != nil {
					errs[g] = fmt.Errorf("enqueue root %d: %w", i, err)
					return
				}
				ids[i] = res.JobID
				if acked != nil {
					acked(res.JobID)
				}
			}
		})
	}
	return ids, func() error { wg.Wait(); return errors.Join(errs...) }
}

// placeLedger copies the ledger file src into a new state directory as its
// ductile.db, with nothing beside it, and returns the directory.
func placeLedger(t *testing.T, src string) string {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.MkdirAll(state, 0o700))
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(daemon.DBPath(state), b, 0o600))
	return state
}

// TestBackupWhileJobsRun backs up the ledger of a daemon working through
// 1,000 root jobs (each routing a child): the copy verifies, holds every
// job enqueued before the backup began, and a daemon started on it
// recovers the jobs the copy caught running and finishes every job.
func TestBackupWhileJobsRun(t *testing.T) {
	t.Parallel()
	const roots = 1000
	w := newJobWorld(t, crashConfig)
	d := w.startDaemon()
	l := openLedgerSync(t, w.state, "FULL")
	var mu sync.Mutex
	var acked []string
	ids, enqueued := enqueueRoots(t, w, l, roots, func(id string) { mu.Lock(); acked = append(acked, id); mu.Unlock() })
	waitFor(t, time.Minute, "every root enqueued and a job running", func() bool {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		c := jobCounts(t, l)
		return n == roots && c["emit running"]+c["sink running"] > 0
	})
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()

	to := filepath.Join(t.TempDir(), "backups", "ductile-backup.db")
	var dry backupJSON
	w.runJSON(0, &dry, "ledger", "backup", "--to", to, "--dry-run", "--json")
	require.True(t, dry.DryRun)
	require.Positive(t, dry.Backup.Head)
	require.NoFileExists(t, to)

	var b backupJSON
	w.runJSON(0, &b, "ledger", "backup", "--to", to, "--json")
	require.NotNil(t, b.Verified)
	require.True(t, b.Verified.OK, "the copy verifies")
	require.Equal(t, b.Backup.Head, b.Verified.Chain.LastSeq)
	require.Equal(t, b.Backup.Head, b.Verified.Checkpoint, "the copy's projections match a replay of all of it")
	require.NoFileExists(t, to+"-wal", "a single file")
	t.Logf("backed up %d events (%.1f MiB) in %.2fs while the daemon ran; verified", b.Verified.Chain.Events, float64(b.Backup.Bytes)/(1<<20), b.Seconds)

	// A second backup to the same file is refused, the first left as it is.
	r := w.run("ledger", "backup", "--to", to)
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "already exists: choose a new --to file")

	require.NoError(t, enqueued())
	w.stopDaemon(d)

	// A daemon on the copy: the jobs running at the copy are recovered, and
	// every job enqueued before the backup began is there and finishes.
	state := placeLedger(t, to)
	restored := startProcess(t, nil, ductileBin, "--config", w.config, "--state-dir", state, "system", "start")
	restored.waitLine(t, 0, messageIs("ductile started"))
	copyLedger := openLedgerSync(t, state, "NORMAL")
	running := map[string]bool{}
	for _, line := range func() []string { lines, _ := restored.snapshot(); return lines }() {
		var entry struct {
			Message string `json:"message"`
			JobID   string `json:"job_id"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Message == "recovered a job left running by a stopped process" {
			running[entry.JobID] = true
		}
	}
	waitAllTerminal(t, copyLedger, 3*time.Minute)
	require.Equal(t, 0, restored.signal(t, syscall.SIGTERM))
	copyWorld := &jobWorld{t: t, config: w.config, state: state, scratch: w.scratch}
	jobs := map[string]jobView{}
	for _, j := range copyWorld.jobList("--limit", "100000") {
		jobs[j.ID] = j
	}
	for _, id := range before {
		require.Contains(t, jobs, id, "a job enqueued before the backup began is in the copy")
		require.Equal(t, "succeeded", jobs[id].Status, id)
	}
	var verify struct {
		OK bool `json:"ok"`
	}
	copyWorld.runJSON(0, &verify, "ledger", "verify", "--json")
	require.True(t, verify.OK)
	t.Logf("the daemon on the copy recovered %d jobs the copy caught running and finished %d jobs (%d of %d roots were in the copy)",
		len(running), len(jobs), countIn(ids, jobs), roots)
}

func countIn(ids []string, jobs map[string]jobView) int {
	n := 0
	for _, id := range ids {
		if _, ok := jobs[id]; ok {
			n++
		}
	}
	return n
}

// TestAdoptRestore restores a backup over a ledger that went on past it:
// the head witness beside the ledger names a head the copy lacks, so the
// daemon refuses it, naming adopt-restore; adopt-restore records how many
// events the copy lacks and the daemon then starts, and ledger verify is
// clean.
func TestAdoptRestore(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugin_roots: []\n")
	appendFixtures := func(from, to int) {
		l, err := ledger.Open(context.Background(), daemon.DBPath(w.state), ledger.Options{}) // durable: the syncer writes the witness
		require.NoError(t, err)
		for i := from; i <= to; i++ {
			_, err := l.Append(context.Background(), fixtureEvent(i))
			require.NoError(t, err)
		}
		require.NoError(t, l.Close())
	}
	require.NoError(t, os.MkdirAll(w.state, 0o700))
	appendFixtures(1, 40)
	to := filepath.Join(t.TempDir(), "b.db")
	var b backupJSON
	w.runJSON(0, &b, "ledger", "backup", "--to", to, "--json")
	require.Equal(t, int64(40), b.Backup.Head)

	var adopt struct {
		DryRun  bool `json:"dry_run"`
		Adopted bool `json:"adopted"`
		Restore struct {
			HeadSeq     int64  `json:"head_seq"`
			HeadHash    string `json:"head_hash"`
			WitnessSeq  int64  `json:"witness_seq"`
			WitnessHash string `json:"witness_hash"`
			Missing     int64  `json:"missing"`
		} `json:"restore"`
		Seq int64 `json:"seq"`
	}
	w.runJSON(0, &adopt, "ledger", "adopt-restore", "--json")
	require.False(t, adopt.Adopted, "nothing to adopt in a ledger at its witness")

	// The original goes on, durably (the syncer writes the witness), then
	// is lost; the copy is put in its place, the witness stays.
	appendFixtures(41, 47)
	for _, p := range []string{"-wal", "-shm"} {
		os.Remove(daemon.DBPath(w.state) + p)
	}
	copied, err := os.ReadFile(to)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(daemon.DBPath(w.state), copied, 0o600))

	r := w.run("system", "start")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "the ledger ends at seq 40 but seq 47")
	require.Contains(t, r.stderr, "adopt it with: ductile ledger adopt-restore")

	w.runJSON(0, &adopt, "ledger", "adopt-restore", "--dry-run", "--json")
	require.True(t, adopt.DryRun)
	require.False(t, adopt.Adopted)
	require.Equal(t, int64(40), adopt.Restore.HeadSeq)
	require.Equal(t, int64(47), adopt.Restore.WitnessSeq)
	require.Equal(t, int64(7), adopt.Restore.Missing)
	require.Equal(t, b.Backup.HeadHash, adopt.Restore.HeadHash)

	r = w.run("ledger", "adopt-restore")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "adopted the restored ledger: it ends at seq 40, its head witness named seq 47: the 7 events after seq 40 are not in it")
	require.Contains(t, r.stdout, "recorded ledger.restore_adopted at seq 41")
	tail := parseTail(t, w.run("ledger", "tail", "--json", "-n", "1").stdout)
	require.Equal(t, "ledger.restore_adopted", tail[0].Type)
	require.JSONEq(t, fmt.Sprintf(`{"head_seq":40,"head_hash":%q,"witness_seq":47,"witness_hash":%q,"missing":7}`,
		adopt.Restore.HeadHash, adopt.Restore.WitnessHash), string(tail[0].Data))

	d := w.startDaemon()
	w.stopDaemon(d)
	var verify struct {
		OK bool `json:"ok"`
	}
	w.runJSON(0, &verify, "ledger", "verify", "--json")
	require.True(t, verify.OK)

	// Adopted, the ledger is at its witness again; an unreadable witness
	// is ignored, as the daemon ignores it.
	r = w.run("ledger", "adopt-restore")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "nothing to adopt")
	require.NoError(t, os.WriteFile(daemon.DBPath(w.state)+".head", []byte("not a witness\n"), 0o600))
	r = w.run("ledger", "adopt-restore")
	require.Equal(t, 0, r.code, "an unreadable witness is ignored, as the daemon does: %s", r)
	require.True(t, strings.Contains(r.stdout, "nothing to adopt"), "%s", r)
}

// TestBackupCarriesArchives: the archive files an archived ledger records
// are copied beside the backup, and the copy, put in a new state
// directory with them, verifies across the archive and its main file.
func TestBackupCarriesArchives(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
service: {dedupe_ttl: 1ms}
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	for range 3 {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "sink", "--command", "handle", "--json")
		require.Equal(t, "succeeded", run.Status)
	}
	cut := time.Now().UTC().Format(time.RFC3339Nano)
	var run runView
	w.runJSON(0, &run, "plugin", "run", "sink", "--command", "handle", "--json")
	var archived archiveJSON
	w.runJSON(0, &archived, "ledger", "archive", "--before", cut, "--json")
	require.NotNil(t, archived.Archive)

	dir := t.TempDir()
	to := filepath.Join(dir, "ductile.db")
	r := w.run("ledger", "backup", "--to", to)
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "copied the archive of events 1..")
	require.Contains(t, r.stdout, "verified: hash chain intact")
	require.FileExists(t, filepath.Join(dir, archived.Archive.File))

	var v verifyJSON
	restored := &jobWorld{t: t, config: w.config, state: dir, scratch: w.scratch}
	restored.runJSON(0, &v, "ledger", "verify", "--json")
	require.True(t, v.OK)
	require.Len(t, v.Archives, 1)
	require.True(t, v.Archives[0].OK)
	require.Equal(t, archived.Archive.LastSeq, v.Chain.ArchivedThrough)
}
