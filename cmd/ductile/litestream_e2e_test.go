package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
)

// litestreamBinary finds Litestream: bin/litestream at the repository's
// root (task tools:litestream), else on $PATH. Absent, the test is skipped
// with the way to install it, except under CI (CI set), where it fails: CI
// must run the recipe docs/operations.md promises.
func litestreamBinary(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join("..", "..", "bin", "litestream")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("litestream"); err == nil {
		return p
	}
	const how = "litestream is not installed: install it with task tools:litestream (go install github.com/benbjohnson/litestream/cmd/litestream@v0.3.13, needs cgo)"
	if os.Getenv("CI") != "" {
		t.Fatal(how + "; CI must run this test")
	}
	t.Skip(how)
	return ""
}

// TestLitestreamReplicaRestores is the recipe of docs/operations.md
// (Replication with Litestream): Litestream replicates a running daemon's
// ledger to a file replica while jobs are enqueued and run; the daemon and
// Litestream are killed with SIGKILL (the machine is lost); the replica is
// restored into a new state directory, a daemon starts on it, recovers
// the jobs that were running, and finishes every job; every job
// acknowledged more than the replication interval before the kill is
// there, and ledger verify is clean.
func TestLitestreamReplicaRestores(t *testing.T) {
	t.Parallel()
	litestream := litestreamBinary(t)
	const (
		roots        = 300
		syncInterval = time.Second
	)
	w := newJobWorld(t, crashConfig)
	d := w.startDaemon()
	replica := filepath.Join(t.TempDir(), "replica")
	config := filepath.Join(t.TempDir(), "litestream.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `dbs:
  - path: %s
    replicas:
      - type: file
        path: %s
        sync-interval: %s
`, daemon.DBPath(w.state), replica, syncInterval), 0o600))
	ls := startProcess(t, cleanEnv(t), litestream, "replicate", "-config", config)
	waitFor(t, 30*time.Second, "litestream's first snapshot in the replica", func() bool {
		snapshots, _ := filepath.Glob(filepath.Join(replica, "generations", "*", "snapshots", "*"))
		return len(snapshots) > 0
	}, func() string { return ls.stderr.String() })

	l := openLedgerSync(t, w.state, "FULL")
	var mu sync.Mutex
	ackedAt := map[string]time.Time{}
	ids, enqueued := enqueueRoots(t, w, l, roots, func(id string) { mu.Lock(); ackedAt[id] = time.Now(); mu.Unlock() })
	require.NoError(t, enqueued())
	lastAck := time.Now()
	// The contract is about time: what was acknowledged more than one
	// replication interval before the loss is in the replica. Wait two
	// intervals past the last acknowledgement while the daemon works on.
	waitFor(t, 30*time.Second, "two replication intervals after the last acknowledgement, with a job running", func() bool {
		c := jobCounts(t, l)
		return time.Since(lastAck) > 2*syncInterval && c["emit running"]+c["sink running"] > 0
	})
	require.Equal(t, -1, d.signal(t, syscall.SIGKILL))
	killedAt := time.Now()
	require.Equal(t, -1, ls.signal(t, syscall.SIGKILL))
	before := 0
	mu.Lock()
	for _, at := range ackedAt {
		if killedAt.Sub(at) > syncInterval {
			before++
		}
	}
	mu.Unlock()

	// Restore on "another machine": a new state directory, no head witness.
	state := filepath.Join(t.TempDir(), "state")
	restore := exec.Command(litestream, "restore", "-config", config, "-o", daemon.DBPath(state), daemon.DBPath(w.state))
	restore.Env = cleanEnv(t)
	out, err := restore.CombinedOutput()
	require.NoError(t, err, "%s", out)
	restoredWorld := &jobWorld{t: t, config: w.config, state: state, scratch: w.scratch}
	started := time.Now()
	restored := restoredWorld.startDaemon()
	copyLedger := openLedgerSync(t, state, "NORMAL")
	waitAllTerminal(t, copyLedger, 3*time.Minute)
	restoredWorld.stopDaemon(restored)
	recovered := 0
	lines, _ := restored.snapshot()
	for _, line := range lines {
		var entry struct {
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Message == "recovered a job left running by a stopped process" {
			recovered++
		}
	}

	jobs := map[string]jobView{}
	for _, j := range restoredWorld.jobList("--limit", "100000") {
		jobs[j.ID] = j
	}
	missing := 0
	for _, id := range ids {
		if _, ok := jobs[id]; !ok {
			missing++
			if killedAt.Sub(ackedAt[id]) > syncInterval {
				t.Errorf("job %s, acknowledged %v before the kill, is not in the restored ledger", id, killedAt.Sub(ackedAt[id]))
			}
		}
	}
	var verify struct {
		OK    bool `json:"ok"`
		Chain struct {
			Events int64 `json:"events"`
		} `json:"chain"`
	}
	restoredWorld.runJSON(0, &verify, "ledger", "verify", "--json")
	require.True(t, verify.OK, "ledger verify on the restore")
	t.Logf("%d roots acknowledged more than %v before the kill, all restored (%d of %d roots missing, acknowledged later); "+
		"the restore has %d events; the daemon on it recovered %d jobs the replica caught running and finished %d jobs in %v",
		before, syncInterval, missing, roots, verify.Chain.Events, recovered, len(jobs), time.Since(started).Round(time.Millisecond))
}
