package workerhost_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/workerhost"
)

// restartable serves a fake daemon on a loopback port it can leave (its
// listener and every connection closed at once, as a daemon killed with
// SIGKILL does) and come back to on the same port.
type restartable struct {
	t       *testing.T
	handler http.Handler
	addr    string

	mu  sync.Mutex
	srv *http.Server
}

func serveRestartable(t *testing.T, d *daemon) *restartable {
	r := &restartable{t: t, handler: http.HandlerFunc(d.serve), addr: "127.0.0.1:0"}
	r.up()
	t.Cleanup(r.down)
	return r
}

// up listens on the address again (the first time, on a free port).
func (r *restartable) up() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	require.NoError(r.t, err)
	r.addr = ln.Addr().String()
	srv := &http.Server{Handler: r.handler}
	go func() { _ = srv.Serve(ln) }()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

// down closes the listener and every connection, long-polls included.
func (r *restartable) down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}

// logBook is a slog destination the test reads while the host runs.
type logBook struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBook) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count is how many log lines hold s.
func (b *logBook) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

func (b *logBook) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// restartHost is a host of d's plugin calling the restartable server,
// logging at debug level into the returned book.
func restartHost(t *testing.T, d *daemon, r *restartable, o workerhost.Options) (*workerhost.Host, *logBook) {
	t.Helper()
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	o.Client = workerhost.NewClient("http://"+r.addr, "dtk_test", &http.Client{Transport: transport}, events.Worker{Name: "box-1", PID: 42})
	o.Plugins = plugins(t)
	book := &logBook{}
	o.Log = slog.New(slog.NewJSONHandler(book, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := workerhost.New(o)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", book)
		}
	})
	return h, book
}

// waitRelease queues a job whose plugin writes its pid and a stderr line,
// then waits until the returned file exists, writes another line and
// succeeds; it returns that file and the plugin's pid file.
func waitRelease(t *testing.T, d *daemon) (release, pidFile string) {
	dir := t.TempDir()
	release, pidFile = filepath.Join(dir, "release"), filepath.Join(dir, "pid")
	t.Setenv("RELEASE", release)
	t.Setenv("PIDFILE", pidFile)
	d.queue("wait")
	return release, pidFile
}

// linesSent are the stderr lines the daemon took, in order.
func linesSent(d *daemon) []string {
	var out []string
	for _, c := range d.callsTo("logs") {
		for _, l := range c.body["lines"].([]any) {
			out = append(out, l.(map[string]any)["text"].(string))
		}
	}
	return out
}

// callsSince are the calls to kind the daemon took at or after at.
func callsSince(d *daemon, kind string, at time.Time) []call {
	var out []call
	for _, c := range d.callsTo(kind) {
		if !c.at.Before(at) {
			out = append(out, c)
		}
	}
	return out
}

// TestAWorkerRidesOutADaemonRestart: the daemon goes away while the
// worker's plugin runs (every connection cut, the claim long-poll of its
// free slot included) and comes back on the same port. Meanwhile the
// plugin goes on; renewals are tried again within the lease period; the
// plugin finishes and its last stderr lines and its completion wait. Once
// the daemon is back they are delivered, lines before the outcome, the
// completion once; the idle slot claims again and runs the next job.
func TestAWorkerRidesOutADaemonRestart(t *testing.T) {
	d := newDaemon(t, 900*time.Millisecond) // renewals every 300 ms
	srv := serveRestartable(t, d)
	release, pidFile := waitRelease(t, d)
	h, book := restartHost(t, d, srv, workerhost.Options{Concurrency: 2, ClaimWait: time.Second, KillGrace: 200 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()

	pgid := pgidOf(t, d, pidFile)
	d.waitFor("the first stderr line and a renewal", func() bool {
		return len(linesSent(d)) == 1 && len(d.callsTo("renew")) > 0
	})
	srv.down()
	wentAway := time.Now()
	d.waitFor("the worker saying the daemon is away, and two renewals tried meanwhile", func() bool {
		return book.count("the daemon cannot be reached") == 1 && book.count("renewal failed; trying again") >= 2
	})
	require.False(t, groupGone(pgid), "the plugin goes on while the daemon is away")
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	// Its last lines wait, and its completion behind them (the daemon
	// takes a job's output before its outcome).
	d.waitFor("the finished job's last stderr lines kept", func() bool { return book.count("stderr lines not delivered: kept") == 1 })
	require.Empty(t, d.callsTo("complete"))
	tried := book.count("renewal failed; trying again")
	d.waitFor("renewals going on while the result waits", func() bool { return book.count("renewal failed; trying again") >= tried+2 })
	t.Logf("away for %v", time.Since(wentAway).Round(time.Millisecond))

	back := time.Now()
	srv.up()
	d.waitFor("the completion delivered", func() bool { return len(d.callsTo("complete")) == 1 })
	done := d.callsTo("complete")[0]
	require.Equal(t, "ok", done.body["kind"])
	require.Equal(t, "released", done.body["response"].(map[string]any)["result"])
	require.Equal(t, []string{"before the release", "after the release"}, linesSent(d), "every stderr line, once")
	last := d.callsTo("logs")[len(d.callsTo("logs"))-1]
	require.False(t, last.at.After(done.at), "the lines are sent before the outcome")
	require.Equal(t, 1, book.count("the daemon answers again"))

	d.waitFor("the idle slot claiming again", func() bool { return len(callsSince(d, "claim", back)) > 0 })
	d.queue("handle")
	d.waitFor("the next job completed", func() bool { return len(d.callsTo("complete")) == 2 })
	stop()
	require.NoError(t, <-ran)
	require.Len(t, d.callsTo("complete"), 2, "the completion of the job that finished while the daemon was away is sent once")
	completed, dropped, _ := h.Snapshot()
	require.Equal(t, 2, completed)
	require.Zero(t, dropped)
	require.Len(t, d.callsTo("register"), 1, "the registration holds across the restart")
}

// TestAResultTheDaemonNoLongerWantsAfterARestartIsDroppedOnce: the
// daemon comes back having given the job to another worker (its lease ran
// out meanwhile): the completion kept through the outage is refused as a
// stale fence, and dropped, not sent again.
func TestAResultTheDaemonNoLongerWantsAfterARestartIsDroppedOnce(t *testing.T) {
	d := newDaemon(t, 900*time.Millisecond)
	srv := serveRestartable(t, d)
	release, pidFile := waitRelease(t, d)
	h, book := restartHost(t, d, srv, workerhost.Options{Once: true, KillGrace: 200 * time.Millisecond})
	ran := make(chan error, 1)
	go func() { ran <- h.Run(context.Background()) }()
	pgidOf(t, d, pidFile)
	srv.down()
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	d.waitFor("the finished job's last stderr lines kept", func() bool { return book.count("stderr lines not delivered: kept") == 1 })
	stale := func(int) (int, any) {
		return http.StatusConflict, map[string]any{"code": "stale_fence", "message": "fence 10 no longer holds job-wait"}
	}
	d.mu.Lock()
	d.answer["complete"], d.answer["logs"] = stale, stale
	d.mu.Unlock()
	srv.up()
	err := <-ran
	require.True(t, errors.Is(err, workerhost.ErrNoJob), "%v", err)
	require.Len(t, d.callsTo("complete"), 1, "a refused completion is never sent again")
	_, dropped, _ := h.Snapshot()
	require.Equal(t, 1, dropped)
}

// TestAWorkerToldToStopWhileTheDaemonIsAwayStillExits: what a stopping
// worker holds for a daemon that does not come back is tried for the
// grace and lastReportFor, then dropped: Run returns.
func TestAWorkerToldToStopWhileTheDaemonIsAwayStillExits(t *testing.T) {
	workerhost.SetLastReportFor(t, 300*time.Millisecond)
	d := newDaemon(t, 900*time.Millisecond)
	srv := serveRestartable(t, d)
	release, pidFile := waitRelease(t, d)
	h, book := restartHost(t, d, srv, workerhost.Options{ShutdownGrace: 200 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- h.Run(ctx) }()
	pgidOf(t, d, pidFile)
	srv.down()
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	d.waitFor("the finished job's last stderr lines kept", func() bool { return book.count("stderr lines not delivered: kept") == 1 })
	stop()
	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not stop")
	}
	require.Equal(t, 1, book.count("stderr lines not delivered before the worker stopped; dropped"))
	require.Equal(t, 1, book.count("completion not delivered before the worker stopped; dropped"))
	_, dropped, _ := h.Snapshot()
	require.Equal(t, 1, dropped)
}
