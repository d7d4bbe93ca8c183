package main_test

// End-to-end tests: they build the real binary once (TestMain), run it as a
// subprocess against real SQLite files in t.TempDir(), send it real signals,
// and append to its ledger from this process with the ledger package, which
// stands in for "another process appends while the daemon runs".

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/ledger"
)

// ductileBin is the binary under test. TestMain sets it once, before any
// test runs, and nothing writes it afterwards.
var ductileBin string

// prebuiltBinary lets a test that re-runs this test binary hand it the
// binary already built, instead of building another.
var prebuiltBinary = flag.String("ductile.binary", "", "test this ductile binary instead of building one")

// Time limits. A command that takes longer than cmdTimeout is a hang, not a
// slow machine; waitTimeout bounds how long a test waits for a log line,
// an exit after a signal, or an eventual condition.
const (
	cmdTimeout  = 20 * time.Second
	procTimeout = 45 * time.Second
	waitTimeout = 10 * time.Second
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if spec := os.Getenv(faultDaemonEnv); spec != "" {
		return faultDaemon(spec) // a child of TestCrashAtFaultPointsBeforeCommit
	}
	flag.Parse()
	dir, err := os.MkdirTemp("", "ductile-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := isolateEnvironment(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ductileBin = *prebuiltBinary
	if ductileBin == "" {
		ductileBin = filepath.Join(dir, "ductile")
		// go test puts its own GOROOT/bin first on PATH, so "go" is the same
		// toolchain that builds this test.
		build := exec.Command("go", "build", "-o", ductileBin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build ductile: %v\n", err)
			return 1
		}
	}
	code := m.Run()
	if code == 0 {
		// Every helper goroutine (stdout readers, ledgers opened here) must
		// have been stopped by its test's cleanup.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// isolateEnvironment removes from this process the settings a caller may
// have exported that the CLI reads (every DUCTILE_* variable), and points
// $XDG_STATE_HOME into dir, so that no test, in-process or not, depends on
// them or writes to the caller's real state directory.
func isolateEnvironment(dir string) error {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "DUCTILE_") {
			if err := os.Unsetenv(name); err != nil {
				return err
			}
		}
	}
	return os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "xdg-state"))
}

// cleanEnv is the environment without any DUCTILE_* variable and with
// XDG_STATE_HOME in a fresh temp dir, so that no test reads the developer's
// settings or writes to their real state directory; extra is appended.
func cleanEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DUCTILE_") || strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "XDG_STATE_HOME="+t.TempDir())
	return append(env, extra...)
}

// result is how a finished command ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// ductile runs the binary to completion with env (nil: cleanEnv).
func ductile(t *testing.T, env []string, args ...string) result {
	t.Helper()
	if env == nil {
		env = cleanEnv(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ductileBin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "ductile %q did not finish within %v", args, cmdTimeout)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run ductile %q: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// mustRun runs the binary and requires exit 0.
func mustRun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := ductile(t, env, args...)
	require.Equal(t, 0, r.code, "ductile %q:\n%s", args, r)
	return r
}

// proc is a running ductile whose stdout is read line by line as it comes.
type proc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer // written by exec's copier: read it only after done

	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed and replaced whenever a line arrives

	done chan struct{} // closed once stdout hit EOF and the process was reaped
}

// start runs the binary in the background. The test's cleanup kills it if it
// is still running and waits for it, so no process or goroutine outlives the
// test.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProcess(t, env, ductileBin, args...)
}

// startProcess is start for any executable: the test binary itself runs a
// daemon with a fault point (crash_e2e_test.go).
func startProcess(t *testing.T, env []string, bin string, args ...string) *proc {
	t.Helper()
	if env == nil {
		env = cleanEnv(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	p := &proc{
		cmd:  exec.CommandContext(ctx, bin, args...),
		grew: make(chan struct{}),
		done: make(chan struct{}),
	}
	p.cmd.Env = env
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go p.read(stdout)
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		cancel()
	})
	return p
}

// read collects stdout lines until EOF, then reaps the process. It owns
// cmd.Wait: exec requires every read from the pipe to finish first.
func (p *proc) read(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		p.mu.Lock()
		p.lines = append(p.lines, sc.Text())
		close(p.grew)
		p.grew = make(chan struct{})
		p.mu.Unlock()
	}
	_ = p.cmd.Wait() // the exit status is in cmd.ProcessState
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) snapshot() ([]string, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines, p.grew
}

// waitLine returns the first stdout line, counting from line index from,
// for which match is true, and its index. It fails the test if the process
// exits or waitTimeout passes first.
func (p *proc) waitLine(t *testing.T, from int, match func(string) bool) (string, int) {
	t.Helper()
	line, i := p.waitLineOrExit(t, waitTimeout, from, match)
	if i < 0 {
		lines, _ := p.snapshot()
		t.Fatalf("%s exited (code %d) without the expected line\nstdout:\n%s\nstderr:\n%s",
			p.cmd.Args, p.cmd.ProcessState.ExitCode(), strings.Join(lines, "\n"), p.stderr.String())
	}
	return line, i
}

// waitLineOrExit is waitLine that returns index -1 once the process has
// exited without such a line. It fails the test if timeout passes first.
func (p *proc) waitLineOrExit(t *testing.T, timeout time.Duration, from int, match func(string) bool) (string, int) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i := from; ; {
		lines, grew := p.snapshot()
		for ; i < len(lines); i++ {
			if match(lines[i]) {
				return lines[i], i
			}
		}
		select {
		case <-grew:
		case <-p.done:
			lines, _ = p.snapshot()
			for ; i < len(lines); i++ {
				if match(lines[i]) {
					return lines[i], i
				}
			}
			return "", -1
		case <-deadline.C:
			_ = p.cmd.Process.Kill()
			<-p.done
			lines, _ = p.snapshot()
			t.Fatalf("%s printed no expected line within %v\nstdout:\n%s\nstderr:\n%s",
				p.cmd.Args, timeout, strings.Join(lines, "\n"), p.stderr.String())
		}
	}
}

// signal sends sig and returns the exit code once the process has gone,
// failing the test if it takes longer than waitTimeout.
func (p *proc) signal(t *testing.T, sig os.Signal) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	return p.wait(t)
}

// wait returns the exit code (-1 if a signal killed it) once the process has gone.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(waitTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		lines, _ := p.snapshot()
		t.Fatalf("%s still running %v after it was told to stop\nstdout:\n%s\nstderr:\n%s",
			p.cmd.Args, waitTimeout, strings.Join(lines, "\n"), p.stderr.String())
		return 0
	}
}

// kill ends the process if it still runs and returns everything it printed,
// for a failure message.
func (p *proc) kill() string {
	_ = p.cmd.Process.Kill()
	<-p.done
	lines, _ := p.snapshot()
	return fmt.Sprintf("%s\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, strings.Join(lines, "\n"), p.stderr.String())
}

// logLine is one JSON line of the daemon's log.
type logLine struct {
	Timestamp string `json:"timestamp"`
	Level     string `json:"level"`
	Message   string `json:"message"`
	Component string `json:"component"`
	StateDir  string `json:"state_dir"`
	PID       int    `json:"pid"`
	Head      int64  `json:"head"`
	Reason    string `json:"reason"`
}

// messageIs matches a JSON log line whose message is msg.
func messageIs(msg string) func(string) bool {
	return func(line string) bool {
		var l logLine
		return json.Unmarshal([]byte(line), &l) == nil && l.Message == msg
	}
}

// startDaemon runs `ductile system start` on stateDir and waits for its
// "ductile started" line, which it returns parsed.
func startDaemon(t *testing.T, stateDir string) (*proc, logLine) {
	t.Helper()
	p := start(t, nil, "system", "start", "--state-dir", stateDir)
	line, _ := p.waitLine(t, 0, messageIs("ductile started"))
	var l logLine
	require.NoError(t, json.Unmarshal([]byte(line), &l))
	return p, l
}

// openLedger opens the state directory's ledger from this process with
// synchronous=NORMAL (closed by the test's cleanup).
func openLedger(t *testing.T, stateDir string) *ledger.Ledger {
	t.Helper()
	return openLedgerSync(t, stateDir, "NORMAL")
}

// openLedgerSync is openLedger with a given synchronous level: "FULL" is
// what a production process appends with.
func openLedgerSync(t *testing.T, stateDir, synchronous string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), daemon.DBPath(stateDir), ledger.Options{
		Synchronous: synchronous,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// fixtureEvent is event i (1-based) of the standard fixture: streams e2e/1,
// e2e/2, e2e/3 in turn; odd events e2e.created, even ones e2e.updated.
func fixtureEvent(i int) ledger.NewEvent {
	typ := "e2e.created"
	if i%2 == 0 {
		typ = "e2e.updated"
	}
	return ledger.NewEvent{
		Stream:          fmt.Sprintf("e2e/%d", (i-1)%3+1),
		ExpectedVersion: ledger.AnyVersion,
		Type:            typ,
		Data:            map[string]int{"n": i},
		Meta:            ledger.Meta{Actor: "e2e"},
	}
}

// seed appends fixture events 1..n to a new ledger in stateDir (no
// projector runs: the projections stay at checkpoint 0) and returns them as
// stored.
func seed(t *testing.T, stateDir string, n int) []ledger.Event {
	t.Helper()
	l := openLedger(t, stateDir)
	events := make([]ledger.NewEvent, n)
	for i := range events {
		events[i] = fixtureEvent(i + 1)
	}
	seqs, err := l.Append(context.Background(), events...)
	require.NoError(t, err)
	require.Len(t, seqs, n)
	require.Equal(t, int64(1), seqs[0], "seed needs an empty ledger")
	return readAll(t, l)
}

// readAll returns every event of the ledger, oldest first.
func readAll(t *testing.T, l *ledger.Ledger) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	for after := int64(0); ; {
		last, err := l.ReadFrom(context.Background(), after, 4096, ledger.Filter{}, func(ev ledger.Event) error {
			out = append(out, ev)
			return nil
		})
		require.NoError(t, err)
		if last == after {
			return out
		}
		after = last
	}
}

// waitFor polls cond until it holds, failing after timeout. A detail, if
// given, adds to the failure message (e.g. the last value seen, or what a
// daemon printed); it runs only on failure.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("gave up after %v waiting for %s", timeout, what)
			for _, d := range detail {
				msg += "\n" + d()
			}
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runScript runs testdata/file on a raw connection to the state directory's
// database, bypassing the ledger as an intruder would, and returns how many
// rows its last statement changed.
func runScript(t *testing.T, stateDir, file string, args map[string]any) int {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	changes, err := execSQL(t, stateDir, string(script), args)
	require.NoError(t, err, file)
	return changes
}

// execSQL runs script on a raw connection to the state directory's database.
func execSQL(t *testing.T, stateDir, script string, args map[string]any) (changes int, err error) {
	t.Helper()
	conn, err := sqlite.OpenConn(daemon.DBPath(stateDir), sqlite.OpenReadWrite)
	require.NoError(t, err)
	defer conn.Close()
	conn.SetBusyTimeout(5 * time.Second)
	err = sqlitex.ExecuteScript(conn, script, &sqlitex.ExecOptions{Named: args})
	return conn.Changes(), err
}

// statsJSON is the part of `ledger stats --json` the tests check.
type statsJSON struct {
	Events     int64  `json:"events"`
	FirstSeq   int64  `json:"first_seq"`
	LastSeq    int64  `json:"last_seq"`
	First      string `json:"first_recorded_at"`
	Last       string `json:"last_recorded_at"`
	Database   string `json:"database"`
	Streams    int64  `json:"streams"`
	Checkpoint int64  `json:"projector_checkpoint"`
	Lag        int64  `json:"projector_lag"`
	Types      []struct {
		Type  string `json:"type"`
		Count int64  `json:"count"`
	} `json:"types"`
	Daemon    bool     `json:"daemon_running"`
	DaemonPID int      `json:"daemon_pid"`
	Warnings  []string `json:"warnings"`
}

func stats(t *testing.T, stateDir string) statsJSON {
	t.Helper()
	r := mustRun(t, nil, "ledger", "stats", "--json", "--state-dir", stateDir)
	var s statsJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	return s
}

// tailLine is one line of `ledger tail --json`.
type tailLine struct {
	Seq        int64           `json:"seq"`
	Stream     string          `json:"stream"`
	Version    int64           `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	Meta       json.RawMessage `json:"meta"`
	RecordedAt string          `json:"recorded_at"`
	Hash       string          `json:"hash"`
}

// parseTail parses --json output strictly: every field present, nothing else.
func parseTail(t *testing.T, out string) []tailLine {
	t.Helper()
	var lines []tailLine
	for _, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if s == "" {
			continue
		}
		var raw map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(s), &raw), s)
		require.Len(t, raw, 8, "fields of %s", s)
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		var l tailLine
		require.NoError(t, dec.Decode(&l), s)
		lines = append(lines, l)
	}
	return lines
}

// wantLine is how tail --json must print a stored event.
func wantLine(ev ledger.Event) tailLine {
	return tailLine{
		Seq: ev.Seq, Stream: ev.Stream, Version: ev.Version, Type: ev.Type,
		Data: ev.Data, Meta: ev.Meta,
		RecordedAt: ev.RecordedAt.UTC().Format(ledger.TimeFormat),
		Hash:       fmt.Sprintf("%x", ev.Hash),
	}
}

func seqsOf(lines []tailLine) []int64 {
	var out []int64
	for _, l := range lines {
		out = append(out, l.Seq)
	}
	return out
}

// seqRange is lo, lo+step, … ≤ hi.
func seqRange(lo, hi, step int64) []int64 {
	var out []int64
	for s := lo; s <= hi; s += step {
		out = append(out, s)
	}
	return out
}
