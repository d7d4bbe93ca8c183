package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// workerScript is the remote plugin: it answers at once, sleeps first
// with "mode":"slow", or hangs with a child, writing its pid, with
// "mode":"hang".
const workerScript = `#!/bin/sh
read -r req
echo "handled by $WORKER_NAME" >&2
case "$req" in
*'"mode":"hang"'*)
	sleep 300 &
	echo $$ > "$PIDFILE"
	wait
	;;
*'"mode":"slow"'*)
	echo $$ > "$PIDFILE"
	sleep 3
	;;
esac
echo '{"status":"ok","result":"done"}'
`

// remoteWorld is a daemon whose plugin remote runs only on workers: it is
// not installed on the daemon's machine.
type remoteWorld struct {
	*runsWorld
	workerKey string
}

func newRemoteWorld(t *testing.T) *remoteWorld { return newRemoteWorldLeasing(t, 0) }

// testLease is the service.lease_period of the tests that wait for a lease
// to run out or for a renewal: short, so that they take seconds.
const testLease = 3 * time.Second

// newRemoteWorldLeasing is newRemoteWorld with service.lease_period set to
// lease (the default for 0).
func newRemoteWorldLeasing(t *testing.T, lease time.Duration) *remoteWorld {
	service := ""
	if lease > 0 {
		service = fmt.Sprintf("service: {lease_period: %s}\n", lease)
	}
	w := &remoteWorld{runsWorld: newRunsWorld(t, service+`
api: {listen: 127.0.0.1:0}
plugins:
  remote: {runs_on: remote, retry: {max_attempts: 3, backoff_base: 1s}}
`)}
	w.workerKey = lastLine(mustRun(t, nil, w.args("config", "token", "create", "workers", "--scopes", "worker")...).stdout)
	mustRun(t, nil, w.args("system", "reload")...)
	return w
}

// worker starts `ductile worker` NAME with a plugin directory and a state
// folder of its own, as on another machine.
func (w *remoteWorld) worker(name string, args ...string) (*proc, string) {
	w.t.Helper()
	return w.workerOf(workerSpec{name: name, script: workerScript}, args...)
}

// workerSpec is how workerOf starts a worker.
type workerSpec struct {
	name   string
	script string   // the plugin remote's run.sh
	env    []string // more of the worker's environment (its plugin's)
	// logOnStdout sends the worker's log (stderr) to its stdout, so that
	// the test reads it line by line while it runs (proc.waitLine).
	logOnStdout bool
}

// writeRemotePlugin writes the plugin remote, running script, into
// home/plugins and returns that directory.
func writeRemotePlugin(t *testing.T, home, script string) string {
	t.Helper()
	dir := filepath.Join(home, "plugins", "remote")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: remote\nversion: 1.0.0\nprotocol: 2\nentrypoint: run.sh\n" +
		"concurrency_safe: true\ncommands: [{name: handle, type: write}]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755))
	return filepath.Join(home, "plugins")
}

// workerOf starts `ductile worker` as spec says, with a plugin directory
// and a state folder of its own, and waits until it registered; it
// returns the worker and where its plugin writes its pid.
func (w *remoteWorld) workerOf(spec workerSpec, args ...string) (*proc, string) {
	t, name := w.t, spec.name
	t.Helper()
	home := t.TempDir()
	plugins := writeRemotePlugin(t, home, spec.script)
	pidFile := filepath.Join(home, "pid")
	env := cleanEnv(t, append([]string{"XDG_STATE_HOME=" + filepath.Join(home, "state"), "DUCTILE_WORKER_TOKEN=" + w.workerKey,
		"WORKER_NAME=" + name, "PIDFILE=" + pidFile}, spec.env...)...)
	args = append([]string{"--log-format", "json", "worker", "--api", w.base, "--plugins", plugins, "--name", name}, args...)
	var p *proc
	if spec.logOnStdout {
		// sh execs the worker: its pid is the worker's.
		p = startProcess(t, env, "/bin/sh", append([]string{"-c", `exec "$0" "$@" 2>&1`, ductileBin}, args...)...)
	} else {
		p = start(t, env, args...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			select {
			case <-p.done:
				t.Logf("worker %s stderr:\n%s", name, p.stderr.String())
			default:
			}
		}
	})
	waitFor(t, 20*time.Second, "worker "+name+" registered", func() bool {
		var fleet struct {
			Workers []struct {
				Name string `json:"name"`
			} `json:"workers"`
		}
		_, raw := w.do("GET", "/workers", nil)
		_ = json.Unmarshal(raw, &fleet)
		for _, f := range fleet.Workers {
			if f.Name == name {
				return true
			}
		}
		return false
	})
	return p, pidFile
}

// enqueue enqueues a job of remote with payload.
func (w *remoteWorld) enqueue(payload map[string]any) string {
	var accepted struct {
		JobID string `json:"job_id"`
	}
	w.doJSON(http.StatusAccepted, &accepted, "POST", "/plugin/remote/handle", payload)
	return accepted.JobID
}

// status is the job's status.
func (w *remoteWorld) status(id string) string {
	var job struct {
		Status string `json:"status"`
	}
	w.doJSON(http.StatusOK, &job, "GET", "/job/"+id, nil)
	return job.Status
}

// job is the job's status and the types of its events.
func (w *remoteWorld) job(id string) (string, []string) {
	var job struct {
		Status string `json:"status"`
	}
	w.doJSON(http.StatusOK, &job, "GET", "/job/"+id, nil)
	var evs struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	_, raw := w.do("GET", "/job/"+id+"/events", nil)
	_ = json.Unmarshal(raw, &evs)
	var types []string
	for _, e := range evs.Events {
		types = append(types, e.Type)
	}
	return job.Status, types
}

func count(types []string, t string) int {
	n := 0
	for _, x := range types {
		if x == t {
			n++
		}
	}
	return n
}

// stopWorker stops p with SIGTERM and returns its log lines.
func stopWorker(t *testing.T, p *proc) []map[string]any {
	p.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.wait(t))
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestTwoWorkersRunARemotePluginsJobsEachOnce: a daemon whose plugin runs
// only remotely and two `ductile worker` processes with their own plugin
// directories and state folders: N jobs (200; E2E_WORKER_JOBS for
// more), each completed once, by both workers, and the ledger verifies.
func TestTwoWorkersRunARemotePluginsJobsEachOnce(t *testing.T) {
	n := workerJobs(t, 200)
	w := newRemoteWorld(t)
	a, _ := w.worker("box-a", "--concurrency", "4")
	b, _ := w.worker("box-b", "--concurrency", "4")
	elapsed, events := w.runJobs(n)
	mustRun(t, nil, w.args("ledger", "verify")...)

	perWorker := map[string]int{}
	var claimToStart []time.Duration
	for name, p := range map[string]*proc{"box-a": a, "box-b": b} {
		for _, l := range stopWorker(t, p) {
			if l["message"] == "job completed" {
				perWorker[name]++
				claimToStart = append(claimToStart, time.Duration(l["claim_to_start_us"].(float64))*time.Microsecond)
			}
		}
	}
	require.Equal(t, n, perWorker["box-a"]+perWorker["box-b"])
	require.Positive(t, perWorker["box-a"])
	require.Positive(t, perWorker["box-b"])
	slices.Sort(claimToStart)
	t.Logf("%d jobs through 2 remote workers (concurrency 4 each) in %v: %.0f jobs/s; %.1f events per job; per worker %v; claim-to-start p50 %v p99 %v",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), events, perWorker,
		claimToStart[len(claimToStart)/2], claimToStart[len(claimToStart)*99/100])
}

// TestACanceledRemoteJobsProcessGroupIsGoneWithinOneRenewal: a cancel of
// a job running on a worker reaches it with a renewal (every third of the
// lease period) and kills the plugin's process group there; the job ends
// canceled.
func TestACanceledRemoteJobsProcessGroupIsGoneWithinOneRenewal(t *testing.T) {
	w := newRemoteWorldLeasing(t, testLease)
	p, pidFile := w.worker("box-a")
	id := w.enqueue(map[string]any{"mode": "hang"})
	var pgid int
	waitFor(t, 20*time.Second, "the plugin running", func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return false
		}
		pgid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	renewal := testLease / 3 // the worker renews every third of the lease period
	canceled := time.Now()
	code, raw := w.do("POST", "/job/"+id+"/cancel", map[string]any{})
	require.Less(t, code, 300, string(raw))
	waitFor(t, renewal+5*time.Second, "the plugin's process group gone", func() bool {
		return syscall.Kill(-pgid, 0) == syscall.ESRCH
	})
	gone := time.Since(canceled)
	t.Logf("process group gone %v after the cancel (renewal period %v, kill grace included)", gone.Round(time.Millisecond), renewal)
	require.LessOrEqual(t, gone, renewal+pluginGrace, "within one renewal period (and the SIGTERM grace)")
	waitFor(t, 20*time.Second, "the job canceled", func() bool {
		status, _ := w.job(id)
		return status == "canceled"
	})
	stopWorker(t, p)
}

// pluginGrace is the SIGTERM-to-SIGKILL grace of a plugin (its shell
// waits on sleep; SIGTERM ends it at once).
const pluginGrace = 5 * time.Second

// TestAJobOfAWorkerKilledMidJobFinishesOnTheOther: kill -9 a worker while
// its plugin runs; once the lease expires (service.lease_period, short
// here) the sweeper ends the attempt and the retry runs on the other
// worker; the job succeeds once.
func TestAJobOfAWorkerKilledMidJobFinishesOnTheOther(t *testing.T) {
	w := newRemoteWorldLeasing(t, testLease)
	a, pidFile := w.worker("box-a")
	id := w.enqueue(map[string]any{"mode": "slow"})
	waitFor(t, 20*time.Second, "the plugin running on box-a", func() bool {
		_, err := os.Stat(pidFile)
		return err == nil
	})
	killed := time.Now()
	require.NoError(t, a.cmd.Process.Kill()) // SIGKILL: no completion, no goodbye
	a.wait(t)
	b, _ := w.worker("box-b")
	waitFor(t, 20*time.Second, "the job succeeded on box-b", func() bool {
		status, _ := w.job(id)
		return status == "succeeded"
	})
	t.Logf("job finished on the other worker %v after the kill (lease period %v)", time.Since(killed).Round(time.Millisecond), testLease)
	_, types := w.job(id)
	require.Equal(t, 1, count(types, "job.recovered"), "box-a's attempt ended by its lease running out: %v", types)
	require.Equal(t, 2, count(types, "job.started"), "%v", types)
	require.Equal(t, 1, count(types, "job.succeeded"), "%v", types)
	completedOnB := false
	for _, l := range stopWorker(t, b) {
		completedOnB = completedOnB || l["message"] == "job completed" && l["job_id"] == id
	}
	require.True(t, completedOnB, "box-b completed the job")
	mustRun(t, nil, w.args("ledger", "verify")...)
}

// TestWorkerOnceHandlesOneJobAndExits: --once exits 0 after the one job it
// completed, and the other job stays queued for the next worker.
func TestWorkerOnceHandlesOneJobAndExits(t *testing.T) {
	w := newRemoteWorld(t)
	first := w.enqueueAfterRegistration(t)
	p, _ := w.worker("box-once", "--once")
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	status, _ := w.job(first)
	require.Equal(t, "succeeded", status)
	second := w.enqueue(map[string]any{"n": 2})
	status, _ = w.job(second)
	require.Equal(t, "queued", status, "a worker that exited claims nothing more")
}

// enqueueAfterRegistration registers a worker that exits at once (so the
// daemon accepts the remote plugin's jobs) and enqueues one job.
func (w *remoteWorld) enqueueAfterRegistration(t *testing.T) string {
	t.Helper()
	code, raw := w.do("POST", "/worker/register", map[string]any{"name": "placeholder", "host": "h", "version": "e2e",
		"plugins": []any{map[string]any{"name": "remote", "version": "1.0.0", "commands": []any{map[string]any{"name": "handle", "type": "write"}},
			"concurrency_safe": true}}})
	require.Equal(t, http.StatusOK, code, string(raw))
	return w.enqueue(map[string]any{"n": 1})
}

// TestALateWorkersCompletionIsSupersededAndChangesNothing: SIGSTOP a
// worker mid-job past its lease; the other worker runs the retry to its
// end; SIGCONT: what the stopped worker sends then (a renewal or its
// completion) carries a stale fence, is recorded as job.superseded and
// changes nothing, and the worker drops the job.
func TestALateWorkersCompletionIsSupersededAndChangesNothing(t *testing.T) {
	w := newRemoteWorldLeasing(t, testLease)
	a, pidFile := w.worker("box-a")
	id := w.enqueue(map[string]any{"mode": "slow"})
	waitFor(t, 20*time.Second, "the plugin running on box-a", func() bool {
		_, err := os.Stat(pidFile)
		return err == nil
	})
	require.NoError(t, syscall.Kill(a.pid(), syscall.SIGSTOP))
	b, _ := w.worker("box-b")
	waitFor(t, 20*time.Second, "the job succeeded on box-b", func() bool { return w.status(id) == "succeeded" })
	require.NoError(t, syscall.Kill(a.pid(), syscall.SIGCONT))
	waitFor(t, 20*time.Second, "box-a's late request superseded", func() bool {
		_, types := w.job(id)
		return count(types, "job.superseded") > 0
	})
	status, types := w.job(id)
	require.Equal(t, "succeeded", status)
	require.Equal(t, 1, count(types, "job.succeeded"), "%v", types)
	dropped := false
	for _, l := range stopWorker(t, a) {
		dropped = dropped || strings.Contains(fmt.Sprint(l["message"]), "dropped") || strings.Contains(fmt.Sprint(l["message"]), "refused")
	}
	require.True(t, dropped, "box-a says it dropped the job")
	stopWorker(t, b)
	mustRun(t, nil, w.args("ledger", "verify")...)
}

// TestWorkerOverTLS: a worker given the CA with --ca registers with a
// daemon serving TLS; without it, it exits 1 saying to pass --ca.
func TestWorkerOverTLS(t *testing.T) {
	w := newTLSWorld(t)
	w.writeConfig("api:\n  listen: 127.0.0.1:0\n  hosts: [ductile.test]\n  tls: {cert_file: " + w.certFile + ", key_file: " + w.keyFile + "}\n" +
		"plugins:\n  remote: {runs_on: remote}\n")
	key := lastLine(mustRun(t, nil, w.args("config", "token", "create", "box", "--scopes", "worker")...).stdout)
	d := w.startDaemon()
	api := "https://" + apiAddr(t, d)
	plugins := filepath.Join(t.TempDir(), "plugins")
	dir := filepath.Join(plugins, "remote")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\nname: remote\n"+
		"version: 1.0.0\nprotocol: 2\nentrypoint: run.sh\ncommands: [{name: handle, type: write}]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(workerScript), 0o755))
	env := cleanEnv(t, "DUCTILE_WORKER_TOKEN="+key)

	r := ductile(t, env, "worker", "--api", api, "--plugins", plugins, "--name", "box", "--once")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, "pass --ca FILE")

	p := start(t, env, "--log-format", "json", "worker", "--api", api, "--plugins", plugins, "--name", "box", "--ca", w.caFile)
	waitFor(t, 20*time.Second, "the worker registered over TLS", func() bool {
		return strings.Contains(w.run("worker", "list", "--json").stdout, `"box"`)
	})
	p.signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.wait(t), p.stderr.String())
}
