package workerhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/workerhost"
)

// script is the test plugin: its command says what it does.
const script = `#!/bin/sh
read -r req
case "$req" in
*'"command":"report"'*)
	echo "line one" >&2
	echo "line two" >&2
	i=0
	while [ $i -lt 50 ]; do printf '{"progress":0.%02d}\n' $i >&3; i=$((i+1)); done
	printf '%s\n' '{"export":{"type":"text","text":"first"}}' >&3
	printf '%s\n' '{"export":{"type":"text","text":"second"}}' >&3
	printf '%s\n' '{"export":{"type":"url","url":"https://example.com/third"}}' >&3
	printf '%s\n' '{"progress":1,"message":"done"}' >&3
	echo '{"status":"ok","result":"reported"}'
	;;
*'"command":"hang"'*)
	sleep 300 &
	echo $$ > "$PIDFILE"
	wait
	;;
*'"command":"wait"'*)
	echo $$ > "$PIDFILE"
	echo "before the release" >&2
	while [ ! -e "$RELEASE" ]; do sleep 0.02; done
	echo "after the release" >&2
	echo '{"status":"ok","result":"released"}'
	;;
*)
	echo '{"status":"ok","result":"done"}'
	;;
esac
`

// plugins discovers the test plugin as the worker does.
func plugins(t *testing.T) []*pluginhost.Plugin {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "remote")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: remote\nversion: 1.0.0\nprotocol: 2\nentrypoint: run.sh\n" +
		"concurrency_safe: true\ncommands: [{name: report, type: write}, {name: hang, type: write}, {name: handle, type: write}, {name: wait, type: write}]\n" +
		"config_keys: {required: [endpoint]}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755))
	reg, problems := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{ConfigElsewhere: true})
	require.Empty(t, problems)
	return reg.List()
}

// call is one request the fake daemon took.
type call struct {
	path string
	body map[string]any
	at   time.Time
}

// daemon is a fake daemon's worker API: it hands out the claims queued on
// it and records every call; answers may be overridden per path.
type daemon struct {
	t      *testing.T
	srv    *httptest.Server
	lease  time.Duration
	claims chan *engine.Claimed

	mu      sync.Mutex
	calls   []call
	answer  map[string]func(n int) (int, any) // path suffix → status, body (by its n-th call)
	counts  map[string]int
	changed chan struct{}
	fence   int64
}

func newDaemon(t *testing.T, lease time.Duration) *daemon {
	d := &daemon{t: t, lease: lease, claims: make(chan *engine.Claimed, 16), answer: map[string]func(int) (int, any){},
		counts: map[string]int{}, changed: make(chan struct{}, 1)}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *daemon) serve(w http.ResponseWriter, r *http.Request) {
	require.Equal(d.t, "Bearer dtk_test", r.Header.Get("Authorization"))
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	kind := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	d.mu.Lock()
	d.calls = append(d.calls, call{path: r.URL.Path, body: body, at: time.Now()})
	d.counts[kind]++
	n := d.counts[kind]
	answer := d.answer[kind]
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if v != nil {
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	if answer != nil {
		if status, v := answer(n); status != 0 {
			reply(status, v)
			return
		}
	}
	switch kind {
	case "register":
		reply(200, map[string]any{"name": body["name"], "lease_period_ms": d.lease.Milliseconds()})
	case "claim":
		wait := time.Duration(body["wait_ms"].(float64)) * time.Millisecond
		select {
		case c := <-d.claims:
			reply(200, map[string]any{"claim": c})
		case <-time.After(wait):
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	case "renew":
		reply(200, commands.Renewed{LeaseUntil: time.Now().Add(d.lease), Recorded: true})
	case "control":
		reply(200, map[string]any{"export_item_id": "x"})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// queue hands out a claim of command.
func (d *daemon) queue(command string) *engine.Claimed {
	d.mu.Lock()
	d.fence++
	fence := d.fence
	d.mu.Unlock()
	id := "job-" + command
	c := &engine.Claimed{JobID: id, Plugin: "remote", Command: command, Attempt: 1, Fence: fence * 10,
		LeaseUntil: time.Now().Add(d.lease), DeadlineAt: time.Now().Add(time.Minute), Timeout: time.Minute,
		Request: pluginhost.Request{Protocol: 2, JobID: id, Command: command, Config: json.RawMessage(`{"endpoint":"x"}`),
			State: json.RawMessage(`{}`), Context: json.RawMessage(`{}`), DeadlineAt: time.Now().Add(time.Minute)}}
	d.claims <- c
	return c
}

// callsTo are the calls whose path ends in kind, in order.
func (d *daemon) callsTo(kind string) []call {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []call
	for _, c := range d.calls {
		if strings.HasSuffix(c.path, "/"+kind) {
			out = append(out, c)
		}
	}
	return out
}

// waitFor waits until cond holds, woken by each call.
func (d *daemon) waitFor(what string, cond func() bool) {
	d.t.Helper()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-d.changed:
		case <-time.After(50 * time.Millisecond): // for conditions outside the daemon (a process group)
		case <-deadline:
			d.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (d *daemon) host(t *testing.T, o workerhost.Options) *workerhost.Host {
	t.Helper()
	o.Client = workerhost.NewClient(d.srv.URL, "dtk_test", d.srv.Client(), events.Worker{Name: "box-1", PID: 42})
	o.Plugins = plugins(t)
	if o.ClaimWait == 0 {
		o.ClaimWait = 2 * time.Second
	}
	h, err := workerhost.New(o)
	require.NoError(t, err)
	return h
}

func TestOnceRunsOneJobAndReportsItsStderrControlLinesAndOutcome(t *testing.T) {
	d := newDaemon(t, 30*time.Second)
	claim := d.queue("report")
	h := d.host(t, workerhost.Options{Once: true})
	require.NoError(t, h.Run(context.Background()))

	reg := d.callsTo("register")
	require.Len(t, reg, 1)
	plugin := reg[0].body["plugins"].([]any)[0].(map[string]any)
	require.Equal(t, "remote", plugin["name"])
	require.True(t, plugin["concurrency_safe"].(bool))

	var lines []string
	for _, c := range d.callsTo("logs") {
		require.EqualValues(t, claim.Fence, c.body["fence"])
		for _, l := range c.body["lines"].([]any) {
			lines = append(lines, l.(map[string]any)["text"].(string))
		}
	}
	require.Equal(t, []string{"line one", "line two"}, lines)

	var exports []string
	var progress []float64
	for _, c := range d.callsTo("control") {
		require.EqualValues(t, claim.Fence, c.body["fence"])
		if x, ok := c.body["export"].(map[string]any); ok {
			exports = append(exports, fmt.Sprint(x["type"], ":", orEmpty(x["text"]), orEmpty(x["url"])))
		}
		if p, ok := c.body["progress"].(map[string]any); ok && p["progress"] != nil {
			progress = append(progress, p["progress"].(float64))
		}
	}
	require.Equal(t, []string{"text:first", "text:second", "url:https://example.com/third"}, exports, "export items in order")
	require.NotEmpty(t, progress)
	require.LessOrEqual(t, len(progress), 2, "51 progress lines written at once coalesce to the first and the last: %v", progress)
	require.Equal(t, 1.0, progress[len(progress)-1], "the last progress value is delivered")

	done := d.callsTo("complete")
	require.Len(t, done, 1)
	a := done[0].body
	require.Equal(t, "ok", a["kind"])
	require.EqualValues(t, claim.Fence, a["fence"])
	require.Equal(t, "box-1", a["worker"].(map[string]any)["name"])
	require.Equal(t, "reported", a["response"].(map[string]any)["result"])
	for _, c := range d.callsTo("control") {
		require.False(t, c.at.After(done[0].at), "every control line is sent before the completion")
	}
	completed, dropped, claimToStart := h.Snapshot()
	require.Equal(t, 1, completed)
	require.Zero(t, dropped)
	require.Len(t, claimToStart, 1)
}

func TestAStaleFenceOnCompletionDropsTheJobAndIsNotRetried(t *testing.T) {
	d := newDaemon(t, 30*time.Second)
	d.answer["complete"] = func(int) (int, any) {
		return http.StatusConflict, map[string]any{"code": "stale_fence", "message": "fence 10 no longer holds job-handle"}
	}
	d.queue("handle")
	h := d.host(t, workerhost.Options{Once: true})
	err := h.Run(context.Background())
	require.ErrorIs(t, err, workerhost.ErrNoJob)
	require.Len(t, d.callsTo("complete"), 1, "a refused completion is never sent again")
	_, dropped, _ := h.Snapshot()
	require.Equal(t, 1, dropped)
}

func TestACompletionTheDaemonCannotTakeNowIsTriedAgain(t *testing.T) {
	d := newDaemon(t, 30*time.Second)
	d.answer["complete"] = func(n int) (int, any) {
		if n == 1 {
			return http.StatusServiceUnavailable, map[string]any{"code": "unavailable", "message": "busy"}
		}
		return 0, nil
	}
	d.queue("handle")
	h := d.host(t, workerhost.Options{Once: true})
	require.NoError(t, h.Run(context.Background()))
	require.Len(t, d.callsTo("complete"), 2)
}

func TestClaimErrorsBackOffAndTheHostKeepsClaiming(t *testing.T) {
	d := newDaemon(t, 30*time.Second)
	d.answer["claim"] = func(n int) (int, any) {
		if n <= 2 {
			return http.StatusBadGateway, map[string]any{"code": "error", "message": "proxy down"}
		}
		return 0, nil
	}
	d.queue("handle")
	h := d.host(t, workerhost.Options{Once: true})
	require.NoError(t, h.Run(context.Background()))
	claims := d.callsTo("claim")
	require.Len(t, claims, 3)
	require.GreaterOrEqual(t, claims[1].at.Sub(claims[0].at), 250*time.Millisecond, "the first retry waits at least half the first backoff")
}

func TestAnUnauthorizedRegistrationStopsTheHostWithWhatToDo(t *testing.T) {
	d := newDaemon(t, 30*time.Second)
	d.answer["register"] = func(int) (int, any) {
		return http.StatusUnauthorized, map[string]any{"code": "unauthorized", "message": "no such token"}
	}
	h := d.host(t, workerhost.Options{Once: true})
	err := h.Run(context.Background())
	require.ErrorContains(t, err, "--scopes worker")
	require.Empty(t, d.callsTo("claim"))
}

// hang queues a job whose plugin hangs with a child, and returns where
// it writes its pid.
func hang(t *testing.T, d *daemon) string {
	pidFile := filepath.Join(t.TempDir(), "pid")
	t.Setenv("PIDFILE", pidFile)
	d.queue("hang")
	return pidFile
}

// pgidOf waits for the plugin to write its pid (its process group's id).
func pgidOf(t *testing.T, d *daemon, pidFile string) int {
	var pgid int
	d.waitFor("the plugin's pid", func() bool {
		data, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(data), "\n") {
			return false
		}
		_, err = fmtSscan(string(data), &pgid)
		return err == nil
	})
	return pgid
}

func groupGone(pgid int) bool { return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) }

func TestACancelRequestedOnRenewalKillsThePluginsProcessGroup(t *testing.T) {
	d := newDaemon(t, 300*time.Millisecond) // renewals every 100 ms
	pidFile := hang(t, d)
	cancelNow := make(chan struct{})
	d.answer["renew"] = func(int) (int, any) {
		select {
		case <-cancelNow:
			return 200, commands.Renewed{LeaseUntil: time.Now().Add(300 * time.Millisecond), CancelRequested: true}
		default:
			return 0, nil
		}
	}
	h := d.host(t, workerhost.Options{Once: true, KillGrace: 200 * time.Millisecond})
	ran := make(chan error, 1)
	go func() { ran <- h.Run(context.Background()) }()
	pgid := pgidOf(t, d, pidFile)
	close(cancelNow)
	canceledAt := time.Now()
	d.waitFor("the process group gone", func() bool { return groupGone(pgid) })
	t.Logf("process group gone %v after the cancel was answered", time.Since(canceledAt))
	require.NoError(t, <-ran)
	done := d.callsTo("complete")
	require.Len(t, done, 1)
	require.Equal(t, "canceled", done[0].body["kind"])
	require.NotContains(t, done[0].body, "retryable")
}

func TestAStaleRenewalDropsTheJobWithoutCompletingIt(t *testing.T) {
	d := newDaemon(t, 300*time.Millisecond)
	pidFile := hang(t, d)
	d.answer["renew"] = func(int) (int, any) {
		return http.StatusConflict, map[string]any{"code": "stale_fence", "message": "the lease expired"}
	}
	h := d.host(t, workerhost.Options{Once: true, KillGrace: 200 * time.Millisecond})
	err := h.Run(context.Background())
	require.ErrorIs(t, err, workerhost.ErrNoJob)
	require.Empty(t, d.callsTo("complete"))
	pgid := pgidOf(t, d, pidFile)
	d.waitFor("the plugin of a job the worker lost killed", func() bool { return groupGone(pgid) })
}

func TestStoppingLetsRunningJobsGoOnForTheGraceThenReportsThemInterrupted(t *testing.T) {
	d := newDaemon(t, 30*time.Second)
	pidFile := hang(t, d)
	h := d.host(t, workerhost.Options{ShutdownGrace: 300 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()
	pgid := pgidOf(t, d, pidFile)
	stop()
	require.NoError(t, <-ran)
	d.waitFor("the plugin killed", func() bool { return groupGone(pgid) })
	done := d.callsTo("complete")
	require.Len(t, done, 1)
	require.Equal(t, "interrupted", done[0].body["kind"])
	require.Equal(t, true, done[0].body["retryable"])
	claims := d.callsTo("claim")
	require.False(t, claims[len(claims)-1].at.After(done[0].at), "no claim after the stop")
}
