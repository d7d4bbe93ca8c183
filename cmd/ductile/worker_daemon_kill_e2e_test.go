package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// holdScript is the remote plugin of the daemon-kill test. A job whose
// payload says "hold" marks itself started (MARKS/<job id>.started holds
// the worker's name), waits until the test creates MARKS/<job id>.release,
// marks itself finished and succeeds; any other job succeeds at once. The
// answer names the worker.
const holdScript = `#!/bin/sh
read -r req
case "$req" in
*'"hold":true'*)
	echo "holding on $WORKER_NAME" >&2
	echo "$WORKER_NAME" > "$MARKS/$DUCTILE_RUN_ID.started"
	while [ ! -e "$MARKS/$DUCTILE_RUN_ID.release" ]; do sleep 0.05; done
	echo "released on $WORKER_NAME" >&2
	echo "$WORKER_NAME" > "$MARKS/$DUCTILE_RUN_ID.finished"
	;;
esac
echo '{"status":"ok","result":"done on '"$WORKER_NAME"'"}'
`

// jobEvent is one event of GET /job/{id}/events.
type jobEvent struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// jobEvents are job id's events, oldest first.
func (w *remoteWorld) jobEvents(id string) []jobEvent {
	var out struct {
		Events []jobEvent `json:"events"`
	}
	w.doJSON(200, &out, "GET", "/job/"+id+"/events", nil)
	return out.Events
}

// restartOnSamePort starts the daemon again on the state directory and on
// the port its last run listened on (the workers' --api).
func (w *remoteWorld) restartOnSamePort() {
	w.t.Helper()
	addr := strings.TrimPrefix(w.base, "http://")
	raw, err := os.ReadFile(w.config)
	require.NoError(w.t, err)
	anyPort := regexp.MustCompile(`listen: '?127\.0\.0\.1:0'?`) // the token command rewrote the file: quoted
	require.Regexp(w.t, anyPort, string(raw))
	require.NoError(w.t, os.WriteFile(w.config, anyPort.ReplaceAll(raw, []byte("listen: '"+addr+"'")), 0o600))
	w.boot()
	require.Equal(w.t, "http://"+addr, w.base, "the daemon listens where the workers call")
}

// workerLog is a worker's log lines so far (its log goes to its stdout:
// workerSpec.logOnStdout).
func workerLog(p *proc) []map[string]any {
	lines, _ := p.snapshot()
	var out []map[string]any
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// logged says p logged msg (about job id, if not "").
func logged(p *proc, msg, id string) bool {
	for _, l := range workerLog(p) {
		if l["message"] == msg && (id == "" || l["job_id"] == id) {
			return true
		}
	}
	return false
}

// TestKillingTheDaemonWhileWorkersHoldLeasesRequeuesNothing is issue 23's
// proof "kill -9 the daemon while workers hold leases: after the restart
// the running jobs are not requeued, and their completions apply". Two
// workers with their own state folders hold two jobs each; the daemon is
// killed with SIGKILL. While it is away one job on each worker finishes:
// its result waits on the worker. The daemon restarts on the same state
// directory and port: the waiting results apply, the two jobs still
// running keep their leases (their renewals get through again), and apply
// once released; none is recovered or requeued, each started and
// succeeded once on the worker that claimed it; the idle slot claims
// again; the workers never exited; the ledger verifies.
func TestKillingTheDaemonWhileWorkersHoldLeasesRequeuesNothing(t *testing.T) {
	w := newRemoteWorld(t) // the default lease period (30s): longer than a restart takes
	marks := t.TempDir()
	spec := func(name string) workerSpec {
		return workerSpec{name: name, script: holdScript, env: []string{"MARKS=" + marks}, logOnStdout: true}
	}
	mark := func(id, what string) string {
		data, err := os.ReadFile(filepath.Join(marks, id+"."+what))
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return ""
		}
		return strings.TrimSpace(string(data))
	}
	hold := func(worker string, n int) []string {
		var ids []string
		for range n {
			ids = append(ids, w.enqueue(map[string]any{"hold": true}))
		}
		for _, id := range ids {
			waitFor(t, 20*time.Second, "job "+id+" running on "+worker, func() bool { return mark(id, "started") != "" })
			require.Equal(t, worker, mark(id, "started"), "job %s", id)
		}
		return ids
	}
	release := func(id string) { require.NoError(t, os.WriteFile(filepath.Join(marks, id+".release"), nil, 0o600)) }

	// box-a's two slots hold two jobs; box-b holds the next two and keeps
	// a slot free, whose claim long-poll the kill cuts.
	a, _ := w.workerOf(spec("box-a"), "--concurrency", "2")
	onA := hold("box-a", 2)
	b, _ := w.workerOf(spec("box-b"), "--concurrency", "3")
	onB := hold("box-b", 2)
	held := append(append([]string(nil), onA...), onB...)
	for _, id := range held {
		require.Equal(t, "running", w.status(id))
	}

	require.NoError(t, w.daemon.cmd.Process.Kill()) // SIGKILL: no shutdown, no goodbye
	w.daemon.wait(t)
	killed := time.Now()
	head := stats(t, w.state).LastSeq // what the ledger holds: later events are the new daemon's

	// While it is away, one job on each worker finishes: its result waits.
	finished := []string{onA[0], onB[0]}
	running := []string{onA[1], onB[1]}
	for _, id := range finished {
		release(id)
	}
	for i, p := range []*proc{a, b} {
		id := finished[i]
		waitFor(t, 20*time.Second, "job "+id+" finished and its last stderr lines kept", func() bool {
			return mark(id, "finished") != "" && logged(p, "the daemon cannot be reached: waiting for it to come back. Running plugins go on; "+
				"their renewals, log batches and completions are kept and sent again; claims resume once it answers", "") &&
				logged(p, "stderr lines not delivered: kept, and sent again until the daemon takes it", id)
		})
	}
	for _, id := range running {
		require.Empty(t, mark(id, "finished"), "job %s still runs", id)
	}

	w.restartOnSamePort()
	back := time.Now()
	for _, id := range finished {
		waitFor(t, 30*time.Second, "the result kept through the restart applied to "+id, func() bool { return w.status(id) == "succeeded" })
	}
	applied := time.Since(back)
	for _, id := range running {
		waitFor(t, 30*time.Second, "a renewal of "+id+"'s lease recorded by the new daemon", func() bool {
			for _, ev := range w.jobEvents(id) {
				if ev.Type == "job.lease_renewed" && ev.Seq > head {
					return true
				}
			}
			return false
		})
		require.Equal(t, "running", w.status(id), "job %s still runs under its lease", id)
		release(id)
	}
	for _, id := range running {
		waitFor(t, 20*time.Second, "job "+id+" succeeded", func() bool { return w.status(id) == "succeeded" })
	}
	after := w.enqueue(map[string]any{"n": 1})
	waitFor(t, 20*time.Second, "a job enqueued after the restart claimed and succeeded", func() bool { return w.status(after) == "succeeded" })

	for i, id := range held {
		worker := map[bool]string{true: "box-a", false: "box-b"}[i < len(onA)]
		_, types := w.job(id)
		require.Zero(t, count(types, "job.recovered"), "%s: %v", id, types)
		require.Zero(t, count(types, "job.retry_scheduled"), "%s: %v", id, types)
		require.Zero(t, count(types, "job.superseded"), "%s: %v", id, types)
		require.Equal(t, 1, count(types, "job.started"), "%s: %v", id, types)
		require.Equal(t, 1, count(types, "job.succeeded"), "%s: %v", id, types)
		for _, ev := range w.jobEvents(id) {
			if ev.Type == "job.succeeded" {
				require.Contains(t, string(ev.Data), "done on "+worker, "job %s: the outcome of the worker that held it", id)
			}
		}
	}
	mustRun(t, nil, w.args("ledger", "verify")...)

	for name, p := range map[string]*proc{"box-a": a, "box-b": b} {
		select {
		case <-p.done:
			t.Fatalf("worker %s exited during the daemon's restart:\n%s", name, p.kill())
		default:
		}
		require.True(t, logged(p, "the daemon answers again: claiming and reporting resume", ""), "worker %s", name)
		require.Equal(t, 0, p.signal(t, syscall.SIGTERM), "worker %s stops cleanly", name)
	}
	t.Logf("daemon killed and restarted on the same port after %v; the results kept on the workers applied %v after the restart",
		back.Sub(killed).Round(time.Millisecond), applied.Round(time.Millisecond))
}
