package pluginhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

func pollRequest() pluginhost.Request {
	return pluginhost.Request{JobID: "job-1", Command: "poll"}
}

// run runs fixture name with short, test-friendly bounds.
func run(t *testing.T, name string, opts pluginhost.RunOptions) pluginhost.Result {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Grace == 0 {
		opts.Grace = 200 * time.Millisecond
	}
	res := pluginhost.Run(context.Background(), fixture(t, name), pollRequest(), opts)
	t.Logf("%s: kind=%s exit=%d err=%q duration=%v", name, res.Kind, res.ExitCode, res.Err, res.Duration)
	return res
}

func TestRunSuccess(t *testing.T) {
	t.Parallel()
	res := run(t, "ok", pluginhost.RunOptions{})

	require.Equal(t, events.OutcomeOK, res.Kind)
	require.Empty(t, res.Err)
	require.False(t, res.Retryable)
	require.Equal(t, 0, res.ExitCode)
	require.Positive(t, res.PID)
	require.Positive(t, res.Duration)
	require.NotNil(t, res.Response)
	require.Equal(t, "done", res.Response.Result)
	require.Equal(t, []pluginhost.Event{{Type: "t.done", Payload: json.RawMessage(`{"n":1}`), DedupeKey: "k1"}}, res.Response.Events)
	require.JSONEq(t, `{"cursor":"abc"}`, string(res.Response.StateUpdates))
	require.Equal(t, []pluginhost.Log{{Level: "info", Message: "hi"}}, res.Response.Logs)
	require.Contains(t, string(res.Stdout), `"status":"ok"`)
	requireGroupGone(t, res.PID)
}

func TestRunRequestEnvelope(t *testing.T) {
	t.Parallel()
	p := fixture(t, "request")
	req := pluginhost.Request{
		JobID:   "job-42",
		Command: "handle",
		Config:  json.RawMessage(`{"token": "s3cret", "n": 1.50}`),
		State:   json.RawMessage(`{"cursor":"abc"}`),
		Event:   json.RawMessage(`{"type":"x.y","payload":{"k":"<v>"}}`),
	}
	before := time.Now()
	res := pluginhost.Run(context.Background(), p, req, pluginhost.RunOptions{Timeout: 30 * time.Second})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)

	// The plugin saw exactly one compact line, keys in protocol order.
	got := string(res.Response.StateUpdates)
	require.Regexp(t, `^\{"protocol":2,"job_id":"job-42","command":"handle","config":\{"token":"s3cret","n":1.50\},"state":\{"cursor":"abc"\},"context":\{\},"event":\{"type":"x.y","payload":\{"k":"<v>"\}\},"deadline_at":"[^"]+Z"\}$`, got)

	var echoed struct {
		DeadlineAt time.Time `json:"deadline_at"`
	}
	require.NoError(t, json.Unmarshal(res.Response.StateUpdates, &echoed))
	require.WithinRange(t, echoed.DeadlineAt, before.Add(29*time.Second), time.Now().Add(30*time.Second))

	// cwd is the plugin directory; the environment is the parent's.
	require.Contains(t, string(res.Stderr), "cwd="+p.Dir+"\n")
	require.Contains(t, string(res.Stderr), "PATH="+os.Getenv("PATH")+"\n")
}

func TestRunEventOmittedWhenEmpty(t *testing.T) {
	t.Parallel()
	res := pluginhost.Run(context.Background(), fixture(t, "request"), pollRequest(), pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.NotContains(t, string(res.Response.StateUpdates), `"event"`)
	require.Contains(t, string(res.Response.StateUpdates), `"config":{},"state":{},"context":{}`)
}

func TestRunOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture   string
		kind      events.Outcome
		retryable bool
		exit      int
		err       string // substring of Result.Err
		response  bool
	}{
		{fixture: "status_error", kind: events.OutcomeError, retryable: true, exit: 0, err: "boom", response: true},
		{fixture: "retry_false", kind: events.OutcomeError, retryable: false, exit: 0, err: "permanent", response: true},
		{fixture: "exit78", kind: events.OutcomeError, retryable: false, exit: 78, err: "exit 78: missing api key"},
		{fixture: "exit3", kind: events.OutcomeError, retryable: true, exit: 3, err: "exit 3: something broke"},
		{fixture: "exit3_response", kind: events.OutcomeError, retryable: true, exit: 3, err: "upstream 503 (exit 3)", response: true},
		{fixture: "not_json", kind: events.OutcomeProtocolError, retryable: true, exit: 0, err: "not a JSON object"},
		{fixture: "empty", kind: events.OutcomeProtocolError, retryable: true, exit: 0, err: "empty stdout"},
		{fixture: "no_status", kind: events.OutcomeProtocolError, retryable: true, exit: 0, err: `no "status"`},
		{fixture: "two_objects", kind: events.OutcomeProtocolError, retryable: true, exit: 0, err: "not a single JSON object"},
		{fixture: "ok_no_result", kind: events.OutcomeOK, exit: 0, response: true},
		{fixture: "ignores_stdin", kind: events.OutcomeOK, exit: 0, response: true},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			res := run(t, tc.fixture, pluginhost.RunOptions{})
			require.Equal(t, tc.kind, res.Kind)
			require.Equal(t, tc.retryable, res.Retryable)
			require.Equal(t, tc.exit, res.ExitCode)
			require.Contains(t, res.Err, tc.err)
			require.Equal(t, tc.response, res.Response != nil)
			requireGroupGone(t, res.PID)
		})
	}
}

func TestRunLargeRequestToPluginThatIgnoresStdin(t *testing.T) {
	t.Parallel()
	// 1 MiB of state: far more than a pipe buffer, never read by the plugin.
	state := `{"blob":"` + strings.Repeat("x", 1<<20) + `"}`
	req := pollRequest()
	req.State = json.RawMessage(state)
	res := pluginhost.Run(context.Background(), fixture(t, "ignores_stdin"), req, pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Less(t, res.Duration, 5*time.Second)
}

// A process outside the group that holds stdin open, unread, while the
// request is larger than the pipe takes, delays nothing: the rest of the
// request is given up on once the plugin has exited (on the portable path,
// its writing goroutine is stopped; goleak checks it ended).
func TestRunLargeRequestWithStdinHeldByAnEscapedChild(t *testing.T) {
	t.Parallel()
	req := pollRequest()
	req.State = json.RawMessage(`{"blob":"` + strings.Repeat("x", 1<<20) + `"}`)
	res := pluginhost.Run(context.Background(), fixture(t, "escaped_stdin"), req, pluginhost.RunOptions{WaitDelay: 10 * time.Second})
	m := regexp.MustCompile(`escaped=(\d+)`).FindSubmatch(res.Stderr)
	require.NotNil(t, m, "stderr: %q", res.Stderr)
	escaped, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = unix.Kill(escaped, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(escaped, &ws, 0, nil) // re-parented to this subreaper
	})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "stdin held", res.Response.Result)
	require.Less(t, res.Duration, 5*time.Second, "neither the held stdin nor WaitDelay (10s) delays the result")
	requireGroupGone(t, res.PID)
}

func TestRunStdoutOverCap(t *testing.T) {
	t.Parallel()
	res := run(t, "big_stdout", pluginhost.RunOptions{})

	require.Equal(t, events.OutcomeProtocolError, res.Kind)
	require.True(t, res.Retryable)
	require.True(t, res.StdoutTruncated)
	require.Len(t, res.Stdout, 10<<20)
	require.Equal(t, bytes.Repeat([]byte("a"), 10<<20), res.Stdout)
	require.Greater(t, res.StdoutBytes, int64(10<<20), "how much it wrote before it was killed")
	require.Contains(t, res.Err, "stdout exceeded 10485760 bytes")
	require.Nil(t, res.Response)
	requireGroupGone(t, res.PID)
}

func TestRunStderrOverCap(t *testing.T) {
	t.Parallel()
	res := run(t, "big_stderr", pluginhost.RunOptions{})

	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.True(t, res.StderrTruncated)
	require.EqualValues(t, 110000, res.StderrBytes)
	// Its first and last 32 KiB, and what lies between them.
	require.Equal(t, strings.Repeat("b", 32<<10)+"\n[ductile: 44464 bytes left out here; 110000 bytes in all]\n"+strings.Repeat("z", 32<<10), string(res.Stderr))
	require.Equal(t, "noisy", res.Response.Result)
	require.False(t, res.StdoutTruncated)
}

func TestRunTimeoutKillsStubbornGroup(t *testing.T) {
	t.Parallel()
	// The plugin and its child both ignore SIGTERM and the child holds
	// stdout: only the SIGKILL after the grace period ends them.
	const timeout, grace = time.Second, 200 * time.Millisecond
	res := run(t, "stubborn", pluginhost.RunOptions{Timeout: timeout, Grace: grace})

	require.Equal(t, events.OutcomeTimeout, res.Kind)
	require.True(t, res.Retryable)
	require.Equal(t, -1, res.ExitCode)
	require.Contains(t, string(res.Stderr), "ready child=", "the child was forked before the timeout")
	require.Contains(t, res.Err, "timed out after 1s; SIGKILL after 200ms grace")
	require.GreaterOrEqual(t, res.Duration, timeout+grace)
	require.Less(t, res.Duration, timeout+grace+3*time.Second, "the child holding stdout must not delay the result")
	requireGroupGone(t, res.PID)
}

func TestRunOrphanHoldingStdoutDoesNotDelayResult(t *testing.T) {
	t.Parallel()
	res := run(t, "orphan", pluginhost.RunOptions{WaitDelay: 10 * time.Second})

	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "left a child behind", res.Response.Result)
	require.Less(t, res.Duration, 5*time.Second)
	requireGroupGone(t, res.PID)
}

func TestRunEscapedChildIsBoundedByWaitDelay(t *testing.T) {
	t.Parallel()
	// A child that left the group (setsid) cannot be killed by the runner;
	// it can only hold the pipes until WaitDelay.
	const waitDelay = 300 * time.Millisecond
	res := run(t, "escaped", pluginhost.RunOptions{WaitDelay: waitDelay})

	m := regexp.MustCompile(`escaped=(\d+)`).FindSubmatch(res.Stderr)
	require.NotNil(t, m, "stderr: %q", res.Stderr)
	escaped, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = unix.Kill(escaped, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(escaped, &ws, 0, nil) // re-parented to this subreaper
	})

	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Equal(t, "escaped child", res.Response.Result)
	require.GreaterOrEqual(t, res.Duration, waitDelay)
	require.Less(t, res.Duration, waitDelay+3*time.Second)
	requireGroupGone(t, res.PID) // the escaped child is in its own group
}

func TestRunCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started int
	res := pluginhost.Run(ctx, fixture(t, "sleeper"), pollRequest(), pluginhost.RunOptions{
		Timeout: time.Minute,
		Grace:   200 * time.Millisecond,
		OnStart: func(pid int) {
			started = pid
			cancel()
		},
	})

	require.Equal(t, events.OutcomeCanceled, res.Kind)
	require.False(t, res.Retryable)
	require.Equal(t, started, res.PID)
	require.Less(t, res.Duration, 5*time.Second)
	requireGroupGone(t, res.PID)
}

func TestRunCanceledStubbornEscalates(t *testing.T) {
	t.Parallel()
	// Cancel only once the plugin ignores SIGTERM (its trap has run), so
	// the SIGTERM sent on cancellation is ignored and only the SIGKILL
	// after the grace period ends the group.
	const grace = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trapped := make(chan bool, 1)
	res := pluginhost.Run(ctx, fixture(t, "stubborn"), pollRequest(), pluginhost.RunOptions{
		Timeout: time.Minute,
		Grace:   grace,
		OnStart: func(pid int) {
			go func() {
				defer cancel()
				trapped <- waitIgnoresSIGTERM(pid, 5*time.Second) && waitForChild(pid, "sleep", 5*time.Second)
			}()
		},
	})
	require.True(t, <-trapped, "the plugin never ignored SIGTERM and forked its child before the SIGKILL")

	require.Equal(t, events.OutcomeCanceled, res.Kind)
	require.False(t, res.Retryable)
	require.Equal(t, -1, res.ExitCode)
	require.Contains(t, res.Err, "canceled; SIGKILL after 200ms grace")
	require.GreaterOrEqual(t, res.Duration, grace)
	require.Less(t, res.Duration, grace+5*time.Second, "the child holding stdout must not delay the result")
	requireGroupGone(t, res.PID)
}

// waitIgnoresSIGTERM polls /proc/<pid>/status every millisecond until its
// SigIgn mask has SIGTERM set, and reports whether that happened before
// timeout (false also if the process is gone).
func waitIgnoresSIGTERM(pid int, timeout time.Duration) bool {
	status := filepath.Join("/proc", strconv.Itoa(pid), "status")
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(status)
		if err != nil {
			return false
		}
		for line := range strings.Lines(string(b)) {
			hex, ok := strings.CutPrefix(line, "SigIgn:")
			if !ok {
				continue
			}
			// Signal n is bit n-1 of the mask.
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err == nil && mask&(1<<(unix.SIGTERM-1)) != 0 {
				return true
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// waitForChild polls /proc every millisecond until pid has a child process
// running the command named (its comm), and reports whether that happened
// before timeout (false also if pid is gone).
func waitForChild(pid int, name string, timeout time.Duration) bool {
	children := filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children")
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(children)
		if err != nil {
			return false
		}
		for _, child := range strings.Fields(string(b)) {
			if comm, err := os.ReadFile(filepath.Join("/proc", child, "comm")); err == nil && strings.TrimSpace(string(comm)) == name {
				return true
			}
		}
	}
	return false
}

func TestRunCanceledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := pluginhost.Run(ctx, fixture(t, "ok"), pollRequest(), pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeCanceled, res.Kind)
	require.Zero(t, res.PID)
}

func TestRunStartFailure(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"no_shebang", "does_not_exist"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := run(t, name, pluginhost.RunOptions{})
			require.Equal(t, events.OutcomeError, res.Kind)
			require.True(t, res.Retryable)
			require.Contains(t, res.Err, "start ")
			require.Equal(t, -1, res.ExitCode)
			require.Zero(t, res.PID)
		})
	}
}

// A script that cannot be run says what is wrong with it and how to fix
// it: a CRLF script used to be reported as a missing "/bin/sh" (install it),
// and one with no #! line as a bare "exec format error".
func TestRunStartFailureSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture string
		exit    int
		want    []string
	}{
		{fixture: "crlf", exit: -1, want: []string{`its #! line, "#!/bin/sh\r", ends with a carriage return`, "Windows (CRLF) line endings", `sed -i 's/\r$//' `}},
		{fixture: "crlf_env", exit: 127, want: []string{`its #! line, "#!/usr/bin/env sh\r", ends with a carriage return`, `sed -i 's/\r$//' `}},
		{fixture: "no_shebang", exit: -1, want: []string{"exec format error", "it has no #! line", "#!/bin/sh"}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			res := run(t, tc.fixture, pluginhost.RunOptions{})
			require.Equal(t, events.OutcomeError, res.Kind)
			require.True(t, res.Retryable)
			require.Equal(t, tc.exit, res.ExitCode)
			for _, w := range tc.want {
				require.Contains(t, res.Err, w)
			}
			require.NotContains(t, res.Err, "install it", "the interpreter is there")
			require.Contains(t, res.Err, fixture(t, tc.fixture).Entrypoint, "the fix names the file")
		})
	}
}

func TestRunBadRequest(t *testing.T) {
	t.Parallel()
	req := pollRequest()
	req.Config = json.RawMessage(`[1,2]`)
	res := pluginhost.Run(context.Background(), fixture(t, "ok"), req, pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeError, res.Kind)
	require.False(t, res.Retryable)
	require.Contains(t, res.Err, "config must be a JSON object")
	require.Zero(t, res.PID)
}

// BenchmarkRunEcho runs the fixture plugin on GOMAXPROCS goroutines (as
// many workers; run with -cpu 2 for two), and reports this process's CPU per
// run (not the plugin's).
func BenchmarkRunEcho(b *testing.B) { benchmarkRun(b, pluginhost.RunOptions{}) }

// BenchmarkRunEchoOnStderr is BenchmarkRunEcho with OnStderr set, as the
// dispatcher runs plugins: a plugin that writes nothing to stderr must cost
// the same (allocs/op, cpu-µs/run).
func BenchmarkRunEchoOnStderr(b *testing.B) {
	benchmarkRun(b, pluginhost.RunOptions{OnStderr: func(pluginhost.StderrLines) { b.Error("the plugin wrote nothing to stderr") }})
}

// BenchmarkRunPreparedAsDispatcher runs the fixture plugin as the
// dispatcher runs a job's: RunPrepared, its process identified as it
// spawns (OnSpawn), its stderr streamed, its run id in its environment and
// its control channel read (it writes nothing there).
func BenchmarkRunPreparedAsDispatcher(b *testing.B) {
	benchmarkRunWith(b, func(ctx context.Context, p *pluginhost.Plugin) pluginhost.Result {
		var spawned events.PluginProcess
		res := pluginhost.RunPrepared(ctx, p, "poll", func() (pluginhost.Request, error) {
			if spawned.PGID == 0 {
				return pluginhost.Request{}, errors.New("OnSpawn was not called first")
			}
			return pollRequest(), nil
		}, pluginhost.RunOptions{
			OnSpawn:  func(proc events.PluginProcess) { spawned = proc },
			OnStderr: func(pluginhost.StderrLines) { b.Error("the plugin wrote nothing to stderr") },
			RunID:    "job-1",
			Control:  func(pluginhost.ControlMessage) { b.Error("the plugin wrote nothing on its control channel") },
		})
		return res
	})
}

func benchmarkRun(b *testing.B, opts pluginhost.RunOptions) {
	benchmarkRunWith(b, func(ctx context.Context, p *pluginhost.Plugin) pluginhost.Result {
		return pluginhost.Run(ctx, p, pollRequest(), opts)
	})
}

func benchmarkRunWith(b *testing.B, run func(context.Context, *pluginhost.Plugin) pluginhost.Result) {
	p := fixture(b, "ok")
	ctx := context.Background()
	b.SetParallelism(1)
	b.ReportAllocs()
	cpu0 := selfCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res := run(ctx, p)
			if res.Kind != events.OutcomeOK {
				b.Errorf("kind %s: %s", res.Kind, res.Err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spawns/s")
	b.ReportMetric(float64((selfCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/run")
}

// selfCPU is the CPU time this process has used, not its children's.
func selfCPU(b *testing.B) time.Duration {
	var r unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &r); err != nil {
		b.Fatal(err)
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func TestRunPreparedWritesTheRequestPreparedAfterTheSpawn(t *testing.T) {
	t.Parallel()
	res := pluginhost.RunPrepared(context.Background(), fixture(t, "request"), "poll", func() (pluginhost.Request, error) {
		req := pollRequest()
		req.JobID = "prepared-late"
		return req, nil
	}, pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.Contains(t, string(res.Stdout), "prepared-late", "the plugin got the prepared request")
}

func TestRunPreparedKillsThePluginWhenPrepareFails(t *testing.T) {
	t.Parallel()
	res := pluginhost.RunPrepared(context.Background(), fixture(t, "request"), "poll", func() (pluginhost.Request, error) {
		return pluginhost.Request{}, errors.New("job already started elsewhere")
	}, pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeCanceled, res.Kind)
	require.True(t, res.NotStarted)
	require.Equal(t, "not started: job already started elsewhere", res.Err)
	require.False(t, res.Retryable)
	require.Empty(t, res.Stdout, "the plugin never received a request to answer")
	requireGroupGone(t, res.PID)
}

func TestRunPreparedDoesNotPrepareWhenTheSpawnFails(t *testing.T) {
	t.Parallel()
	p := fixture(t, "request")
	p.Entrypoint = filepath.Join(t.TempDir(), "missing.sh") // nothing to exec
	var calls atomic.Int32
	res := pluginhost.RunPrepared(context.Background(), p, "poll", func() (pluginhost.Request, error) {
		calls.Add(1)
		return pollRequest(), nil
	}, pluginhost.RunOptions{})
	require.Equal(t, events.OutcomeError, res.Kind)
	require.True(t, res.Retryable, "a failed spawn is worth another attempt")
	require.Zero(t, calls.Load(), "no process, no request to prepare")
}
