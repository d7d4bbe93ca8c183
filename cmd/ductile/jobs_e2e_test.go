package main_test

// End-to-end tests of jobs: the real binary runs real plugins (the bundled
// echo and the shell fixtures under testdata/plugins) on a real ledger in
// t.TempDir(), with or without a daemon. Results are read back through the
// CLI (plugin run --json, job inspect --json, job list --json, queue --json,
// ledger tail/replay/verify --json) and through what the fixture plugins
// wrote down (the requests they received, their PIDs).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jobWorld is one test's config file, state directory and scratch directory
// (handed to fixture plugins as config.dir).
type jobWorld struct {
	t                      *testing.T
	config, state, scratch string
}

// newJobWorld writes a config file from yaml, in which $PLUGINS is the
// fixture plugin root and $SCRATCH the scratch directory.
func newJobWorld(t *testing.T, yaml string) *jobWorld {
	t.Helper()
	plugins, err := filepath.Abs(filepath.Join("testdata", "plugins"))
	require.NoError(t, err)
	w := &jobWorld{t: t, state: filepath.Join(t.TempDir(), "state"), scratch: t.TempDir()}
	w.config = filepath.Join(t.TempDir(), "config.yaml")
	body := strings.NewReplacer("$PLUGINS", plugins, "$SCRATCH", w.scratch).Replace(yaml)
	require.NoError(t, os.WriteFile(w.config, []byte(body), 0o600))
	return w
}

func (w *jobWorld) args(args ...string) []string {
	return append([]string{"--config", w.config, "--state-dir", w.state}, args...)
}

// run runs the binary on this world.
func (w *jobWorld) run(args ...string) result {
	w.t.Helper()
	return ductile(w.t, nil, w.args(args...)...)
}

// runJSON runs the binary, requires exit code want and decodes stdout into out.
func (w *jobWorld) runJSON(want int, out any, args ...string) result {
	w.t.Helper()
	r := w.run(args...)
	require.Equal(w.t, want, r.code, "ductile %q:\n%s", args, r)
	require.NoError(w.t, json.Unmarshal([]byte(r.stdout), out), "ductile %q:\n%s", args, r)
	return r
}

// startDaemon runs `system start` on this world and waits until it has started.
func (w *jobWorld) startDaemon() *proc {
	w.t.Helper()
	p := start(w.t, nil, w.args("system", "start")...)
	w.t.Cleanup(func() {
		if w.t.Failed() {
			lines, _ := p.snapshot()
			w.t.Logf("daemon log:\n%s", strings.Join(lines, "\n"))
		}
	})
	p.waitLine(w.t, 0, messageIs("ductile started"))
	return p
}

// stopDaemon stops it with SIGTERM and requires a clean exit.
func (w *jobWorld) stopDaemon(p *proc) {
	w.t.Helper()
	require.Equal(w.t, 0, p.signal(w.t, syscall.SIGTERM), "daemon stderr: %s", p.stderr.String())
}

// runView is what `plugin run --json` prints.
type runView struct {
	JobID         string          `json:"job_id"`
	Plugin        string          `json:"plugin"`
	Command       string          `json:"command"`
	Status        string          `json:"status"`
	Deduped       bool            `json:"deduped"`
	ExistingJobID string          `json:"existing_job_id"`
	Attempt       int             `json:"attempt"`
	Error         string          `json:"error"`
	Response      json.RawMessage `json:"response"`
	RanBy         string          `json:"ran_by"`
}

// jobView is a job as job inspect, job list and queue print it.
type jobView struct {
	ID            string          `json:"job_id"`
	Seq           int64           `json:"seq"`
	Plugin        string          `json:"plugin"`
	Command       string          `json:"command"`
	Payload       json.RawMessage `json:"payload"`
	Status        string          `json:"status"`
	Attempt       int             `json:"attempt"`
	MaxAttempts   int             `json:"max_attempts"`
	SubmittedBy   string          `json:"submitted_by"`
	DedupeKey     *string         `json:"dedupe_key"`
	LastError     *string         `json:"last_error"`
	ParentJobID   *string         `json:"parent_job_id"`
	SourceEventID *string         `json:"source_event_id"`
	CorrelationID string          `json:"correlation_id"`
	UpdatedSeq    int64           `json:"updated_seq"`
}

// attemptView is one attempt (a job_log row) as job inspect prints it.
type attemptView struct {
	Attempt         int             `json:"attempt"`
	Status          string          `json:"status"`
	Kind            *string         `json:"kind"`
	Response        json.RawMessage `json:"response"`
	Stdout          *string         `json:"stdout"`
	Stderr          *string         `json:"stderr"`
	StderrTruncated bool            `json:"stderr_truncated"`
	Error           *string         `json:"error"`
	ExitCode        *int            `json:"exit_code"`
	DurationMS      *int64          `json:"duration_ms"`
}

// streamEvent is one event of a job's stream as job inspect prints it.
type streamEvent struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type inspectView struct {
	Job      jobView       `json:"job"`
	Attempts []attemptView `json:"attempts"`
	Events   []streamEvent `json:"events"`
	Children []jobView     `json:"children"`
}

// settled reports whether the projections (job, attempts, children) have
// caught up with the job's stream, the source of truth.
func (in inspectView) settled() bool {
	return len(in.Events) > 0 && in.Job.UpdatedSeq == in.Events[len(in.Events)-1].Seq
}

func (in inspectView) eventTypes() []string {
	var out []string
	for _, ev := range in.Events {
		out = append(out, ev.Type)
	}
	return out
}

// event decodes the data of the job's only event of type typ.
func (in inspectView) event(t *testing.T, typ string, out any) {
	t.Helper()
	var found []streamEvent
	for _, ev := range in.Events {
		if ev.Type == typ {
			found = append(found, ev)
		}
	}
	require.Len(t, found, 1, "events of type %s in %v", typ, in.eventTypes())
	require.NoError(t, json.Unmarshal(found[0].Data, out))
}

func (w *jobWorld) inspect(id string) inspectView {
	w.t.Helper()
	var in inspectView
	w.runJSON(0, &in, "job", "inspect", id, "--json")
	return in
}

// waitInspect inspects the job until cond holds, failing after waitTimeout.
func (w *jobWorld) waitInspect(id, what string, cond func(inspectView) bool) inspectView {
	w.t.Helper()
	var in inspectView
	waitFor(w.t, waitTimeout, fmt.Sprintf("job %s to be %s", id, what), func() bool {
		in = w.inspect(id)
		return cond(in)
	}, func() string { return "last seen:\n" + mustJSON(in) })
	return in
}

// waitSettled waits until the job is terminal and its projections have
// caught up (a daemon's projector follows the log a moment behind).
func (w *jobWorld) waitSettled(id string) inspectView {
	w.t.Helper()
	return w.waitInspect(id, "terminal and projected", func(in inspectView) bool {
		switch in.Job.Status {
		case "succeeded", "dead", "canceled":
			return in.settled()
		}
		return false
	})
}

// jobList is `job list --json` with extra flags.
func (w *jobWorld) jobList(flags ...string) []jobView {
	w.t.Helper()
	var jobs []jobView
	w.runJSON(0, &jobs, append([]string{"job", "list", "--json"}, flags...)...)
	return jobs
}

// replayAndVerify checks the ledger the test built (no daemon may run): it
// verifies, rebuilds the projections in place with ledger replay, verifies
// again, and requires the rebuilt job list to equal the live one.
func (w *jobWorld) replayAndVerify() {
	w.t.Helper()
	var verify struct {
		OK    bool `json:"ok"`
		Chain struct {
			OK     bool  `json:"ok"`
			Events int64 `json:"events"`
		} `json:"chain"`
		Checkpoint int64 `json:"checkpoint"`
	}
	w.runJSON(0, &verify, "ledger", "verify", "--json")
	require.True(w.t, verify.OK)
	require.True(w.t, verify.Chain.OK)
	require.Positive(w.t, verify.Chain.Events)
	require.Equal(w.t, verify.Chain.Events, verify.Checkpoint, "the replay in verify covers every event")
	before := w.jobList("--limit", "100000")

	var replay struct {
		Until      int64 `json:"until"`
		Checkpoint int64 `json:"checkpoint"`
		DryRun     bool  `json:"dry_run"`
	}
	w.runJSON(0, &replay, "ledger", "replay", "--json")
	require.False(w.t, replay.DryRun)
	require.Equal(w.t, verify.Chain.Events, replay.Until)
	require.Equal(w.t, replay.Until, replay.Checkpoint)

	w.runJSON(0, &verify, "ledger", "verify", "--json")
	require.True(w.t, verify.OK)
	require.Equal(w.t, replay.Checkpoint, verify.Checkpoint)
	require.Equal(w.t, before, w.jobList("--limit", "100000"), "projections rebuilt by replay equal the live ones")
}

func mustJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// echoOK is the bundled echo plugin's response to its first poll with no payload.
const echoOK = `{"status":"ok","result":"echo poll","events":[{"type":"echo.poll","payload":{}}],` +
	`"state_updates":{"last_command":"poll","runs":1},"logs":[{"level":"info","message":"echo poll run 1"}]}`

// echoError is echo's response in mode error.
const echoError = `{"status":"error","error":"echo poll: failing on purpose (mode=error)","retry":true,` +
	`"logs":[{"level":"error","message":"mode=error"}]}`

// TestPluginRunOutcomes runs one job per case through a daemon (plugin run
// --wait) and checks how it ended: the printed result and exit status, the
// job and each attempt as projected, and the events of its stream.
func TestPluginRunOutcomes(t *testing.T) {
	t.Parallel()
	type retryData struct {
		Attempt     int    `json:"attempt"`
		NextRetryAt string `json:"next_retry_at"`
		DelayMS     int64  `json:"delay_ms"`
	}
	type deadData struct {
		Attempt int    `json:"attempt"`
		Reason  string `json:"reason"`
	}
	const (
		enqueued = "job.enqueued"
		started  = "job.started"
		ok       = "job.succeeded"
		failed   = "job.failed"
		retry    = "job.retry_scheduled"
		dead     = "job.dead"
	)
	for _, tc := range []struct {
		name     string
		plugin   string
		settings string // YAML flow mapping under plugins.<plugin>
		exit     int
		status   string   // the job's final status
		attempts []string // "status/kind" of each attempt
		events   []string // the job stream's event types
		err      string   // the job's last error ("" for none)
		check    func(t *testing.T, w *jobWorld, d *proc, run runView, in inspectView)
	}{{
		name:     "success",
		plugin:   "echo",
		settings: `{retry: {max_attempts: 2, backoff_base: 50ms}}`,
		status:   "succeeded",
		attempts: []string{"succeeded/ok"},
		events:   []string{enqueued, started, ok},
		check: func(t *testing.T, _ *jobWorld, _ *proc, run runView, in inspectView) {
			require.JSONEq(t, echoOK, string(run.Response))
			require.JSONEq(t, echoOK, string(in.Attempts[0].Response), "the response is kept in job_log")
			require.Equal(t, 0, *in.Attempts[0].ExitCode)
			require.Nil(t, in.Attempts[0].Stdout, "stdout is kept only when it was not a valid response")
		},
	}, {
		name:     "error is retried, then dead",
		plugin:   "echo",
		settings: `{retry: {max_attempts: 2, backoff_base: 50ms}, config: {mode: error}}`,
		exit:     1,
		status:   "dead",
		attempts: []string{"failed/error", "failed/error"},
		events:   []string{enqueued, started, failed, retry, started, failed, dead},
		err:      "echo poll: failing on purpose (mode=error)",
		check: func(t *testing.T, _ *jobWorld, _ *proc, run runView, in inspectView) {
			for _, a := range in.Attempts {
				require.JSONEq(t, echoError, string(a.Response))
				require.Equal(t, "echo poll: failing on purpose (mode=error)", *a.Error)
			}
			var r retryData
			in.event(t, retry, &r)
			require.Equal(t, 2, r.Attempt)
			require.GreaterOrEqual(t, r.DelayMS, int64(50), "backoff is base·2^0 + random(0, base)")
			require.Less(t, r.DelayMS, int64(100))
			var d deadData
			in.event(t, dead, &d)
			require.Equal(t, deadData{2, "attempt 2 of 2 failed: echo poll: failing on purpose (mode=error)"}, d)
		},
	}, {
		name:     "exit 78 is not retried",
		plugin:   "misbehave",
		settings: `{retry: {max_attempts: 3, backoff_base: 50ms}, config: {mode: exit78}}`,
		exit:     1,
		status:   "dead",
		attempts: []string{"failed/error"},
		events:   []string{enqueued, started, failed, dead},
		err:      "exit 78: misbehave: bad config",
		check: func(t *testing.T, _ *jobWorld, _ *proc, _ runView, in inspectView) {
			require.Equal(t, 78, *in.Attempts[0].ExitCode)
			require.Equal(t, "misbehave: bad config\n", *in.Attempts[0].Stderr)
			var d deadData
			in.event(t, dead, &d)
			require.Equal(t, deadData{1, "not retryable: exit 78: misbehave: bad config"}, d)
		},
	}, {
		name:     "retry false is not retried",
		plugin:   "misbehave",
		settings: `{retry: {max_attempts: 3, backoff_base: 50ms}, config: {mode: noretry}}`,
		exit:     1,
		status:   "dead",
		attempts: []string{"failed/error"},
		events:   []string{enqueued, started, failed, dead},
		err:      "misbehave: permanent failure",
		check: func(t *testing.T, _ *jobWorld, _ *proc, _ runView, in inspectView) {
			require.JSONEq(t, `{"status":"error","error":"misbehave: permanent failure","retry":false}`, string(in.Attempts[0].Response))
			require.Equal(t, 0, *in.Attempts[0].ExitCode)
			var d deadData
			in.event(t, dead, &d)
			require.Equal(t, deadData{1, "not retryable: misbehave: permanent failure"}, d)
		},
	}, {
		name:     "non-JSON stdout is a protocol error",
		plugin:   "echo",
		settings: `{retry: {max_attempts: 2, backoff_base: 50ms}, config: {mode: protocol_error}}`,
		exit:     1,
		status:   "dead",
		attempts: []string{"failed/protocol_error", "failed/protocol_error"},
		events:   []string{enqueued, started, failed, retry, started, failed, dead},
		err:      `protocol error: stdout is not a JSON object (starts with "not json")`,
		check: func(t *testing.T, _ *jobWorld, _ *proc, _ runView, in inspectView) {
			for _, a := range in.Attempts {
				require.Equal(t, "not json\n", *a.Stdout, "stdout kept for debugging")
				require.Nil(t, a.Response)
			}
		},
	}, {
		name:     "stdout over 10 MiB is a protocol error, kept as an excerpt",
		plugin:   "misbehave",
		settings: `{retry: {max_attempts: 1}, config: {mode: bigout}}`,
		exit:     1,
		status:   "dead",
		attempts: []string{"failed/protocol_error"},
		events:   []string{enqueued, started, failed, dead},
		err:      "stdout exceeded 10485760 bytes; plugin killed",
		check: func(t *testing.T, _ *jobWorld, _ *proc, _ runView, in inspectView) {
			a := in.Attempts[0]
			// Its first and last 32 KiB are kept, with how much it wrote
			// before it was killed (over 10 MiB, at most 11 MiB).
			head, rest, ok := strings.Cut(*a.Stdout, "\n")
			require.True(t, ok)
			require.Equal(t, strings.Repeat("o", 32<<10), head)
			marker, tail, _ := strings.Cut(rest, "\n")
			var left, all int
			_, err := fmt.Sscanf(marker, "[ductile: %d bytes left out here; %d bytes in all]", &left, &all)
			require.NoError(t, err, marker)
			require.Greater(t, all, 10<<20)
			require.LessOrEqual(t, all, 11<<20)
			require.Equal(t, all-2*(32<<10), left)
			require.Equal(t, strings.Repeat("o", 32<<10), tail)
			require.Equal(t, -1, *a.ExitCode, "killed by a signal")
		},
	}, {
		name:     "stderr over 64 KiB is kept as an excerpt",
		plugin:   "misbehave",
		settings: `{retry: {max_attempts: 1}, config: {mode: bigerr}}`,
		status:   "succeeded",
		attempts: []string{"succeeded/ok"},
		events:   []string{enqueued, started, ok},
		check: func(t *testing.T, _ *jobWorld, d *proc, run runView, in inspectView) {
			a := in.Attempts[0]
			// Its first and last 32 KiB, and what lies between them.
			require.Equal(t, strings.Repeat("b", 32<<10)+"\n[ductile: 34464 bytes left out here; 100000 bytes in all]\n"+strings.Repeat("z", 32<<10), *a.Stderr)
			require.True(t, a.StderrTruncated)
			require.Contains(t, in.eventTypes(), "job.stderr_written", "stderr was recorded as it came")
			require.JSONEq(t, `{"status":"ok","result":"misbehave: noisy"}`, string(run.Response))
			// It is logged at INFO: a plugin's ordinary output.
			line, _ := d.waitLine(t, 0, messageIs("plugin wrote to stderr"))
			var logged struct {
				Level     string `json:"level"`
				JobID     string `json:"job_id"`
				Truncated bool   `json:"truncated"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &logged))
			require.Equal(t, "INFO", logged.Level)
			require.Equal(t, run.JobID, logged.JobID)
			require.True(t, logged.Truncated)
		},
	}, {
		name:     "retry then success",
		plugin:   "flaky",
		settings: `{retry: {max_attempts: 3, backoff_base: 50ms}, config: {dir: "$SCRATCH"}}`,
		status:   "succeeded",
		attempts: []string{"failed/error", "succeeded/ok"},
		events:   []string{enqueued, started, failed, retry, started, ok},
		check: func(t *testing.T, w *jobWorld, _ *proc, run runView, in inspectView) {
			require.Equal(t, "flaky: first run fails on purpose", *in.Attempts[0].Error)
			require.JSONEq(t, `{"status":"ok","result":"flaky: ok on run 2"}`, string(in.Attempts[1].Response))
			require.JSONEq(t, `{"status":"ok","result":"flaky: ok on run 2"}`, string(run.Response))
			runs, err := os.ReadFile(filepath.Join(w.scratch, "flaky-runs"))
			require.NoError(t, err)
			require.Equal(t, "2\n", string(runs), "the plugin ran exactly twice")
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newJobWorld(t, fmt.Sprintf("plugin_roots: [\"$PLUGINS\"]\nplugins:\n  %s: %s\n", tc.plugin, tc.settings))
			d := w.startDaemon()

			var run runView
			w.runJSON(tc.exit, &run, "plugin", "run", tc.plugin, "--wait", "--timeout", "10s", "--json")
			require.Equal(t, tc.status, run.Status)
			require.Equal(t, len(tc.attempts), run.Attempt)
			require.Equal(t, tc.err, run.Error)
			require.Equal(t, "daemon", run.RanBy)
			require.Equal(t, tc.plugin, run.Plugin)
			require.Equal(t, "poll", run.Command)

			in := w.waitSettled(run.JobID)
			// Lines on stderr are also recorded as they come
			// (job.stderr_written), as many events as the timing makes.
			require.Equal(t, tc.events, slices.DeleteFunc(in.eventTypes(), func(typ string) bool { return typ == "job.stderr_written" }))
			require.Equal(t, tc.status, in.Job.Status)
			require.Equal(t, len(tc.attempts), in.Job.Attempt)
			require.Equal(t, "cli", in.Job.SubmittedBy)
			if tc.err == "" {
				require.Nil(t, in.Job.LastError)
			} else {
				require.Equal(t, tc.err, *in.Job.LastError)
			}
			var attempts []string
			for i, a := range in.Attempts {
				require.Equal(t, i+1, a.Attempt)
				attempts = append(attempts, a.Status+"/"+*a.Kind)
			}
			require.Equal(t, tc.attempts, attempts)
			tc.check(t, w, d, run, in)

			w.stopDaemon(d)
			w.replayAndVerify()
		})
	}
}

// TestPluginTimeoutKillsTheProcessGroup runs, without a daemon, a plugin
// that ignores SIGTERM and forks a child that ignores it too: the timeout
// must end in SIGKILL of the whole group, a dead job of kind timeout, and no
// process left alive.
func TestPluginTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  stubborn: {retry: {max_attempts: 1}, timeouts: {poll: 1s}, config: {dir: "$SCRATCH"}}
`)
	begin := time.Now()
	p := start(t, nil, w.args("plugin", "run", "stubborn", "--json")...)

	// While it runs: both processes exist, in the plugin's own process group,
	// and both ignore SIGTERM (so only the grace period's SIGKILL ends them).
	pidsFile := filepath.Join(w.scratch, "pids")
	var pids []int
	waitFor(t, waitTimeout, "the plugin to write its pids", func() bool {
		b, err := os.ReadFile(pidsFile)
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			pids = append(pids, pid)
		}
		return true
	})
	require.Len(t, pids, 2)
	leader, child := pids[0], pids[1]
	t.Cleanup(func() {
		// Only SIGKILL ends them: if the test failed before the runner did
		// its job, do it here rather than leave them sleeping.
		if !gone(leader) || !gone(child) {
			_ = syscall.Kill(-leader, syscall.SIGKILL)
		}
	})
	require.Equal(t, leader, procStat(t, leader).pgrp, "the plugin leads its own process group")
	require.Equal(t, leader, procStat(t, child).pgrp, "its child is in the plugin's group")
	require.NotEqual(t, p.pid(), leader)
	for _, pid := range pids {
		require.True(t, ignoresSIGTERM(t, pid), "pid %d should ignore SIGTERM", pid)
	}

	code := p.wait(t)
	lines, _ := p.snapshot()
	var run runView
	require.NoError(t, json.Unmarshal([]byte(strings.Join(lines, "\n")), &run), "%s", p.stderr.String())
	require.Equal(t, 1, code, "a dead job exits 1")
	require.Equal(t, "dead", run.Status)
	require.Equal(t, 1, run.Attempt)
	require.Equal(t, "timed out after 1s; SIGKILL after 5s grace", run.Error)
	require.Equal(t, "cli", run.RanBy)
	t.Logf("timeout to dead job took %v", time.Since(begin).Round(time.Millisecond))

	// Nothing of the plugin outlives its run.
	for _, pid := range pids {
		waitFor(t, 5*time.Second, fmt.Sprintf("pid %d to be gone", pid), func() bool { return gone(pid) })
	}

	// The job's stream (the source of truth) says how it ended.
	in := w.inspect(run.JobID)
	require.Equal(t, []string{"job.enqueued", "job.started", "job.timed_out", "job.dead"}, in.eventTypes())
	var ended struct {
		Kind       string `json:"kind"`
		Retryable  bool   `json:"retryable"`
		ExitCode   int    `json:"exit_code"`
		DurationMS int64  `json:"duration_ms"`
		Error      string `json:"error"`
	}
	in.event(t, "job.timed_out", &ended)
	require.Equal(t, "timeout", ended.Kind)
	require.True(t, ended.Retryable, "a timeout is retryable; max_attempts 1 ends it")
	require.Equal(t, -1, ended.ExitCode)
	require.Equal(t, "timed out after 1s; SIGKILL after 5s grace", ended.Error)
	require.GreaterOrEqual(t, ended.DurationMS, int64(6000), "1s timeout + 5s grace before SIGKILL")
	require.Less(t, ended.DurationMS, int64(9000))

	w.replayAndVerify()
	// After the replay the projections certainly hold every event.
	in = w.inspect(run.JobID)
	require.Equal(t, "dead", in.Job.Status)
	require.Len(t, in.Attempts, 1)
	require.Equal(t, "timed_out", in.Attempts[0].Status)
	require.Equal(t, "timeout", *in.Attempts[0].Kind)
}

// TestRoutedEventFansOut routes echo's echo.poll event to two commands of the
// recorder plugin: the parent gets two children with its id and one
// source_event_id, and each child's plugin receives the parent's payload in
// event.payload, with event.source echo.
func TestRoutedEventFansOut(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  recorder: {config: {dir: "$SCRATCH"}}
routes:
  - {from: echo, event_type: echo.poll, to: recorder}
  - {from: echo, event_type: echo.poll, to: recorder, command: notify}
`)
	d := w.startDaemon()
	const payload = `{"city":"Zürich","n":[1,2,{"deep":true}],"q":"say \"hi\""}`

	var run runView
	w.runJSON(0, &run, "plugin", "run", "echo", "--command", "poll", "--payload", payload, "--wait", "--json")
	require.Equal(t, "succeeded", run.Status)
	var resp struct {
		Events []struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(run.Response, &resp))
	require.Len(t, resp.Events, 1)
	require.Equal(t, "echo.poll", resp.Events[0].Type)
	require.JSONEq(t, payload, string(resp.Events[0].Payload), "echo emits the payload it was given")

	parent := w.waitInspect(run.JobID, "settled with two succeeded children", func(in inspectView) bool {
		if !in.settled() || len(in.Children) != 2 {
			return false
		}
		for _, c := range in.Children {
			if c.Status != "succeeded" {
				return false
			}
		}
		return true
	})
	require.Equal(t, "succeeded", parent.Job.Status)
	require.JSONEq(t, payload, string(parent.Job.Payload))

	eventID := parent.Children[0].SourceEventID
	require.NotNil(t, eventID)
	require.NotEmpty(t, *eventID)
	for i, c := range parent.Children {
		require.Equal(t, "recorder", c.Plugin)
		require.Equal(t, []string{"handle", "notify"}[i], c.Command, "children in route order")
		require.Equal(t, run.JobID, *c.ParentJobID)
		require.Equal(t, *eventID, *c.SourceEventID, "one event, one core-assigned id")
		require.Equal(t, "route", c.SubmittedBy)
		require.Equal(t, run.JobID, c.CorrelationID, "a child belongs to its root's tree")
		require.JSONEq(t, payload, string(c.Payload))

		// What the child's plugin received.
		b, err := os.ReadFile(filepath.Join(w.scratch, c.ID+".json"))
		require.NoError(t, err)
		var req struct {
			Protocol int    `json:"protocol"`
			JobID    string `json:"job_id"`
			Command  string `json:"command"`
			Event    struct {
				Type      string          `json:"type"`
				Payload   json.RawMessage `json:"payload"`
				EventID   string          `json:"event_id"`
				Source    string          `json:"source"`
				Timestamp string          `json:"timestamp"`
			} `json:"event"`
		}
		require.NoError(t, json.Unmarshal(b, &req), "%s", b)
		require.Equal(t, 2, req.Protocol)
		require.Equal(t, c.ID, req.JobID)
		require.Equal(t, c.Command, req.Command)
		require.Equal(t, "echo.poll", req.Event.Type)
		require.JSONEq(t, payload, string(req.Event.Payload), "the child receives the parent's payload")
		require.Equal(t, "echo", req.Event.Source)
		require.Equal(t, *eventID, req.Event.EventID)
		_, err = time.Parse(time.RFC3339Nano, req.Event.Timestamp)
		require.NoError(t, err)

		child := w.inspect(c.ID)
		require.Equal(t, []string{"job.enqueued", "job.started", "job.succeeded"}, child.eventTypes())
		require.Empty(t, child.Children)
	}

	// The daemon logged the parent's success with its two routed children.
	line, _ := d.waitLine(t, 0, func(line string) bool {
		var l struct {
			Message string `json:"message"`
			JobID   string `json:"job_id"`
		}
		return json.Unmarshal([]byte(line), &l) == nil && l.Message == "job succeeded" && l.JobID == run.JobID
	})
	var succeeded struct {
		Children int `json:"children"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &succeeded))
	require.Equal(t, 2, succeeded.Children)

	require.Len(t, w.jobList(), 3, "the root and its two children, nothing else")
	w.stopDaemon(d)
	w.replayAndVerify()
}

// TestDedupeUnderConcurrentRuns starts 50 `plugin run --dedupe-key` processes
// at once against a running daemon: exactly one job is enqueued, and the 49
// others say which job they were deduplicated against.
func TestDedupeUnderConcurrentRuns(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  slow: {config: {sleep: "0.3"}}
`)
	d := w.startDaemon()
	const n = 50
	runArgs := []string{"plugin", "run", "slow", "--dedupe-key", "k", "--dedupe-ttl", "1h", "--json"}

	begin := time.Now()
	results := runConcurrently(t, n, w.args(runArgs...)...)
	t.Logf("%d concurrent plugin run processes took %v", n, time.Since(begin).Round(time.Millisecond))

	var enqueued []runView
	var deduped []runView
	for i, r := range results {
		require.Equal(t, 0, r.code, "run %d:\n%s", i, r)
		var run runView
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), "run %d:\n%s", i, r)
		if run.Deduped {
			deduped = append(deduped, run)
		} else {
			enqueued = append(enqueued, run)
		}
	}
	require.Len(t, enqueued, 1, "exactly one run enqueues")
	id := enqueued[0].JobID
	require.NotEmpty(t, id)
	require.Equal(t, "queued", enqueued[0].Status)
	require.Len(t, deduped, n-1)
	for _, run := range deduped {
		require.Equal(t, "deduped", run.Status)
		require.Equal(t, id, run.ExistingJobID)
		require.Empty(t, run.JobID)
	}

	jobs := w.jobList("--plugin", "slow")
	require.Len(t, jobs, 1, "one job exists for the key")
	require.Equal(t, id, jobs[0].ID)
	require.Equal(t, "k", *jobs[0].DedupeKey)

	// Once it has succeeded, the key still covers it for the TTL.
	in := w.waitSettled(id)
	require.Equal(t, "succeeded", in.Job.Status)
	var again runView
	w.runJSON(0, &again, runArgs...)
	require.Equal(t, runView{Plugin: "slow", Command: "poll", Status: "deduped", Deduped: true, ExistingJobID: id, RanBy: "daemon"}, again)
	require.Len(t, w.jobList(), 1)

	w.stopDaemon(d)
	w.replayAndVerify()
}

// runConcurrently starts n copies of the binary with args at the same moment
// and returns how each ended, in start order.
func runConcurrently(t *testing.T, n int, args ...string) []result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	env := cleanEnv(t)
	results := make([]result, n)
	errs := make([]error, n)
	ready := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, ductileBin, args...)
			cmd.Env = env
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			<-ready
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				errs[i] = err
				return
			}
			results[i] = result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
		}()
	}
	close(ready)
	wg.Wait()
	require.NoError(t, ctx.Err(), "the %d runs did not finish within %v", n, cmdTimeout)
	require.NoError(t, errors.Join(errs...))
	return results
}

// TestPluginStateFactsAndWriteThrough runs two recorder plugins three times
// each, without a daemon. facts declares a fact_outputs rule: each run
// receives the previous run's snapshot as state (mirror_object). recorder
// declares none: its state_updates merge shallowly into its state.
func TestPluginStateFactsAndWriteThrough(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  facts: {config: {dir: "$SCRATCH/facts"}}
  recorder: {config: {dir: "$SCRATCH/recorder"}}
`)
	for _, plugin := range []string{"facts", "recorder"} {
		require.NoError(t, os.Mkdir(filepath.Join(w.scratch, plugin), 0o700))
	}
	// states returns the state each of three runs of plugin received.
	states := func(plugin string) []string {
		var got []string
		for i := 1; i <= 3; i++ {
			var run runView
			w.runJSON(0, &run, "plugin", "run", plugin, "--json")
			require.Equal(t, "succeeded", run.Status)
			require.Equal(t, "cli", run.RanBy)
			require.JSONEq(t, fmt.Sprintf(`{"status":"ok","result":"recorded run %d","state_updates":{"%c":%d}}`, i, 'a'+i-1, i),
				string(run.Response))
			b, err := os.ReadFile(filepath.Join(w.scratch, plugin, run.JobID+".json"))
			require.NoError(t, err)
			var req struct {
				State json.RawMessage `json:"state"`
			}
			require.NoError(t, json.Unmarshal(b, &req), "%s", b)
			got = append(got, string(req.State))
		}
		return got
	}
	require.Equal(t, []string{`{}`, `{"a":1}`, `{"b":2}`}, states("facts"),
		"mirror_object: the state is the latest fact, as emitted")
	require.Equal(t, []string{`{}`, `{"a":1}`, `{"a":1,"b":2}`}, states("recorder"),
		"write-through: state_updates merge shallowly into the state")

	// The ledger holds facts for one and merges for the other.
	tail := func(typ string) []tailLine {
		r := mustRun(t, nil, w.args("ledger", "tail", "--type", typ, "--lines", "100", "--json")...)
		return parseTail(t, r.stdout)
	}
	facts := tail("plugin.fact_recorded")
	require.Len(t, facts, 3)
	for i, l := range facts {
		require.Equal(t, "plugin/facts", l.Stream)
		var d struct {
			FactType string          `json:"fact_type"`
			Command  string          `json:"command"`
			Fact     json.RawMessage `json:"fact"`
			View     string          `json:"compatibility_view"`
		}
		require.NoError(t, json.Unmarshal(l.Data, &d))
		require.Equal(t, "x.snapshot", d.FactType)
		require.Equal(t, "poll", d.Command)
		require.Equal(t, "mirror_object", d.View)
		require.JSONEq(t, fmt.Sprintf(`{"%c":%d}`, 'a'+i, i+1), string(d.Fact))
	}
	merges := tail("plugin.state_merged")
	require.Len(t, merges, 3)
	for i, want := range []string{`{"a":1}`, `{"a":1,"b":2}`, `{"a":1,"b":2,"c":3}`} {
		require.Equal(t, "plugin/recorder", merges[i].Stream)
		var d struct {
			Updates json.RawMessage `json:"updates"`
			State   json.RawMessage `json:"state"`
		}
		require.NoError(t, json.Unmarshal(merges[i].Data, &d))
		require.JSONEq(t, fmt.Sprintf(`{"%c":%d}`, 'a'+i, i+1), string(d.Updates))
		require.JSONEq(t, want, string(d.State))
	}

	w.replayAndVerify()
}

// TestQueueShowsActiveJobs holds one job running and one queued behind it
// (one worker) and requires queue --json to list both.
func TestQueueShowsActiveJobs(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
service: {max_workers: 1}
plugins:
  slow: {config: {dir: "$SCRATCH"}}
`)
	// slow holds each job running until this file exists.
	release := filepath.Join(w.scratch, "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) }) // after a failure too: leave no plugin waiting
	d := w.startDaemon()
	var first, second runView
	w.runJSON(0, &first, "plugin", "run", "slow", "--json")
	w.runJSON(0, &second, "plugin", "run", "slow", "--json")
	w.waitInspect(first.JobID, "running", func(in inspectView) bool { return in.Job.Status == "running" })

	var queue struct {
		Counts map[string]int64 `json:"counts"`
		Active []jobView        `json:"active"`
	}
	w.runJSON(0, &queue, "queue", "--json")
	require.Equal(t, map[string]int64{"running": 1, "queued": 1, "cancel_requested": 0}, queue.Counts)
	var active []string
	for _, j := range queue.Active {
		active = append(active, j.ID+" "+j.Status)
	}
	require.Equal(t, []string{first.JobID + " running", second.JobID + " queued"}, active,
		"queue lists the running job, then the queued one")

	// Stopping drains the running job; the queued one waits for the next
	// daemon. The running one is released once the daemon has stopped
	// dispatching, so the queued one cannot take its slot.
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	d.waitLine(t, 0, messageIs("ductile stopping"))
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	require.Equal(t, 0, d.wait(t), "daemon stderr: %s", d.stderr.String())
	require.Equal(t, "succeeded", w.inspect(first.JobID).Job.Status)
	require.Equal(t, "queued", w.inspect(second.JobID).Job.Status)
}

// TestPluginRunWithoutDaemonLeavesProjectionsCurrent runs jobs without a
// daemon (plugin run takes the daemon's place until its job is finished)
// and requires the job as projected to be finished once the command has
// returned: job inspect, job list and queue read projections, and with no
// daemon running nothing else will bring them up to date.
func TestPluginRunWithoutDaemonLeavesProjectionsCurrent(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	// The race lost here is narrow: try a few times.
	for i := 1; i <= 25; i++ {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "sink", "--command", "handle", "--json")
		require.Equal(t, "succeeded", run.Status)
		require.Equal(t, "cli", run.RanBy)
		require.JSONEq(t, `{"status":"ok","result":"sunk"}`, string(run.Response))

		in := w.inspect(run.JobID)
		require.Equal(t, []string{"job.enqueued", "job.started", "job.succeeded"}, in.eventTypes())
		require.Truef(t, in.settled() && in.Job.Status == "succeeded",
			"run %d: plugin run returned, but job %s is projected as %q (updated_seq %d, stream at seq %d): "+
				"the projector was stopped before it applied the job's last events",
			i, run.JobID, in.Job.Status, in.Job.UpdatedSeq, in.Events[len(in.Events)-1].Seq)
	}
	w.replayAndVerify()
}

type procStatus struct {
	state byte
	pgrp  int
}

// procStat reads a process's state and process group from /proc.
func procStat(t *testing.T, pid int) procStatus {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// pid (comm) state ppid pgrp …; comm may hold spaces, so split after ')'.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	pgrp, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	return procStatus{state: f[0][0], pgrp: pgrp}
}

// ignoresSIGTERM reads the process's ignored-signal mask from /proc.
func ignoresSIGTERM(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			require.NoError(t, err)
			return mask&(1<<(uint(syscall.SIGTERM)-1)) != 0
		}
	}
	t.Fatalf("no SigIgn in /proc/%d/status", pid)
	return false
}

// gone reports whether pid no longer runs: no such process, or a zombie
// (dead, waiting to be reaped by init, which is not ours to hurry).
func gone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if rerr != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// TestRetryRunsOnAnIdleDaemon fails jobs once on a daemon with nothing else
// to do: each one's retry must still run when its backoff has passed.
func TestRetryRunsOnAnIdleDaemon(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugins:
  echo: {retry: {max_attempts: 2, backoff_base: 10ms}, config: {mode: error}}
`)
	w.startDaemon()
	// The race lost here is narrow: try a few times.
	for i := 1; i <= 20; i++ {
		r := w.run("plugin", "run", "echo", "--wait", "--timeout", "5s", "--json")
		var run runView
		require.NoErrorf(t, json.Unmarshal([]byte(r.stdout), &run),
			"run %d: the job's retry never ran (the job stays queued, its next_retry_at long past):\n%s", i, r)
		require.Equal(t, 1, r.code)
		require.Equal(t, "dead", run.Status)
		require.Equal(t, 2, run.Attempt)
	}
}

// TestConcurrentCommandsOnAFreshStateDir starts several commands that write
// at once on a state directory that has no ledger yet: each must open
// (create and migrate) it without failing, and enqueue its job.
func TestConcurrentCommandsOnAFreshStateDir(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	const n = 8
	for i, r := range runConcurrently(t, n, w.args("plugin", "run", "sink", "--command", "handle", "--json")...) {
		require.Equal(t, 0, r.code, "command %d:\n%s", i, r)
	}
	require.Len(t, w.jobList(), n)
}

// TestConcurrentPluginRunsWithoutDaemon starts several plugin runs at once
// with no daemon: one of them takes the state directory's lock and runs its
// job, and the others' jobs must still be run (plugin run's promise: with no
// daemon it takes the daemon's place until its job is finished), not left
// queued for a "daemon" that is another plugin run about to exit.
func TestConcurrentPluginRunsWithoutDaemon(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	mustRun(t, nil, w.args("system", "migrate")...) // create the ledger first
	const n = 6
	results := runConcurrently(t, n, w.args("plugin", "run", "sink", "--command", "handle", "--json")...)
	for i, r := range results {
		var run runView
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &run), "run %d:\n%s", i, r)
		require.Equalf(t, "succeeded", run.Status, "run %d: its job was left %s for the lock holder, "+
			"which runs only its own job (ran_by %s):\n%s", i, run.Status, run.RanBy, r)
		require.Equal(t, 0, r.code)
	}
	jobs := w.jobList()
	require.Len(t, jobs, n)
	for _, j := range jobs {
		require.Equal(t, "succeeded", j.Status, "job %s", j.ID)
	}
}
