package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Regression tests for bugs a review found; each failed against the code of
// its day.

func quickRetries(plugin string, maxAttempts int, base time.Duration) func(*config.Config) {
	return func(cfg *config.Config) {
		pc := config.DefaultPlugin()
		pc.Retry.MaxAttempts, pc.Retry.BackoffBase = maxAttempts, base
		cfg.Plugins = map[string]config.PluginConfig{plugin: pc}
	}
}

func (b *testBundle) enqueue(plugin string) string {
	b.t.Helper()
	res, err := commands.EnqueueJob(b.ctx, b.c.Ledger, commands.JobFor(b.c.Config(), plugin, "poll", events.ActorCLI))
	require.NoError(b.t, err)
	return res.JobID
}

func (b *testBundle) fold(id string) *commands.Job {
	b.t.Helper()
	evs, err := b.c.Ledger.ReadStream(b.ctx, events.JobStream(id))
	require.NoError(b.t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(b.t, err)
	return j
}

// A plugin that cannot be spawned used to leave its job queued with nothing
// recorded, forgotten by the candidate cache. Each attempt is now recorded
// as a retryable failure, until the job is dead.
func TestSpawnFailureIsRecordedAndRetried(t *testing.T) {
	b := setup(t, 2, quickRetries("broken", 2, 10*time.Millisecond))
	id := b.enqueue("broken")
	b.waitFor(map[string]string{id: "dead"})
	j := b.fold(id)
	require.Equal(t, 2, j.Attempt)
	require.Contains(t, j.LastError, `the interpreter on its #! line, "/nonexistent/interpreter", was not found`)
}

// The same plugin run without a daemon (RunJob) used to spin on the CPU
// until its context expired; now it ends with the job dead.
func TestRunJobEndsOnSpawnFailure(t *testing.T) {
	b := setupCore(t, quickRetries("broken", 2, 10*time.Millisecond), slog.New(slog.DiscardHandler))
	id := b.enqueue("broken")
	require.NoError(t, b.c.RunJob(b.ctx, id))
	require.Equal(t, events.StatusDead, b.fold(id).Status)
}

// A completion the ledger refuses for a while (another process holds the
// write lock past the busy timeout) used to be dropped, leaving the job
// running for ever. It is now retried until it lands.
func TestCompletionIsRetriedWhileTheLedgerIsBusy(t *testing.T) {
	logs := &recorder{lines: make(chan string, 100)}
	b := setupWith(t, 2, nil, daemon.Options{Logger: slog.New(logs), Ledger: ledger.Options{BusyTimeout: 100 * time.Millisecond}})
	id, release := b.gated("gate", "")
	b.waitFor(map[string]string{id: "running"})

	blocker, err := sqlite.OpenConn(daemon.DBPath(b.dir), sqlite.OpenReadWrite|sqlite.OpenWAL)
	require.NoError(t, err)
	defer blocker.Close()
	require.NoError(t, sqlitex.ExecuteTransient(blocker, "BEGIN IMMEDIATE;", nil))
	release()
	logs.waitFor(t, b.ctx, "recording the job's outcome failed; will try again")
	require.NoError(t, sqlitex.ExecuteTransient(blocker, "COMMIT;", nil))
	b.waitFor(map[string]string{id: "succeeded"})
}

// A shutdown whose interrupted job could not record its outcome (the
// ledger refusing every try: here another connection holds the write lock)
// used to wait for ever. It now gives up after a second drain timeout; the
// job is left running in the ledger, for recovery to run again.
func TestStopGivesUpOnOutcomesTheLedgerRefuses(t *testing.T) {
	logs := &recorder{lines: make(chan string, 100)}
	b := setupWith(t, 1, nil, daemon.Options{Logger: slog.New(logs), Ledger: ledger.Options{BusyTimeout: 50 * time.Millisecond}})
	id, _ := b.gated("gate", "") // never released: only the shutdown ends it
	b.waitFor(map[string]string{id: "running"})

	blocker, err := sqlite.OpenConn(daemon.DBPath(b.dir), sqlite.OpenReadWrite|sqlite.OpenWAL)
	require.NoError(t, err)
	defer blocker.Close()
	require.NoError(t, sqlitex.ExecuteTransient(blocker, "BEGIN IMMEDIATE;", nil))
	stopped := make(chan struct{})
	go func() { b.d.Dispatcher.Stop(); close(stopped) }()
	logs.waitFor(t, b.ctx, "giving up recording the outcomes of interrupted jobs; recovery will run them again")
	select {
	case <-stopped:
	case <-b.ctx.Done():
		t.Fatal("Stop did not return after giving up")
	}
	require.NoError(t, sqlitex.ExecuteTransient(blocker, "COMMIT;", nil))
	require.Equal(t, []string{"running"}, b.statuses(id))
}

// A shutdown that interrupts a job's last attempt used to bury it; the
// interrupted attempt is now given back and the job waits for the next run.
func TestShutdownDoesNotBuryALastAttempt(t *testing.T) {
	b := setup(t, 2, quickRetries("gate", 1, time.Hour))
	id, _ := b.gated("gate", "")
	b.waitFor(map[string]string{id: "running"})
	require.NoError(t, b.d.Close())
	l, err := ledger.Open(context.Background(), daemon.DBPath(b.dir), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	evs, err := l.ReadStream(context.Background(), events.JobStream(id))
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, j.Status)
	require.Equal(t, 2, j.Attempt)
	require.Equal(t, 2, j.MaxAttempts)
}

// RunJob waiting for a retry used to sleep through a cancel from another
// process (holding the lock for up to the whole backoff).
func TestRunJobStopsWaitingWhenCanceled(t *testing.T) {
	logs := &recorder{lines: make(chan string, 100)}
	b := setupCore(t, quickRetries("failing", 3, time.Hour), slog.New(logs))
	id := b.enqueue("failing")
	done := make(chan error, 1)
	go func() { done <- b.c.RunJob(b.ctx, id) }()
	// The first attempt failed and RunJob, having read the retry, waits an hour.
	logs.waitFor(t, b.ctx, "waiting for the retry")
	j := b.fold(id)
	require.Equal(t, events.StatusQueued, j.Status)
	require.Equal(t, 2, j.Attempt)
	status, err := commands.CancelJob(b.ctx, b.c.Ledger, commands.Cancel{JobID: id, Now: time.Now()})
	require.NoError(t, err)
	require.Equal(t, events.StatusCanceled, status)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-b.ctx.Done():
		t.Fatal("RunJob kept waiting for the retry of a canceled job")
	}
}

// A start the ledger refused for now (a full disk; here a trigger the test
// installs refuses every job.started) used to be tried again at once, about
// 1,000 times a second, each try spawning the plugin and killing it, each
// logged. Starts now pause after a refusal, 100 ms doubling to 30 s, the
// run of refusals is logged once (then once per 30 s, with a count), and
// the first start recorded ends the pause.
func TestRefusedStartsBackOff(t *testing.T) {
	logs := &collector{grew: make(chan struct{})}
	b := setupWith(t, 2, nil, daemon.Options{Logger: slog.New(logs)})
	conn, err := sqlite.OpenConn(daemon.DBPath(b.dir), sqlite.OpenReadWrite|sqlite.OpenWAL)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, sqlitex.ExecuteTransient(conn, `CREATE TRIGGER test_refuses_starts BEFORE INSERT ON events
WHEN NEW.type = 'job.started' BEGIN SELECT RAISE(ABORT, 'no space left on device (a test trigger)'); END;`, nil))

	begin := time.Now()
	id := b.enqueue("quick")
	const refusals = 5
	for b.d.Dispatcher.StartsRefused() < refusals {
		select {
		case <-b.ctx.Done():
			t.Fatalf("only %d starts refused", b.d.Dispatcher.StartsRefused())
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Between the five refusals lay pauses of 100, 200, 400 and 800 ms.
	require.GreaterOrEqual(t, time.Since(begin), 1500*time.Millisecond)
	require.Equal(t, []string{"queued"}, b.statuses(id))

	require.NoError(t, sqlitex.ExecuteTransient(conn, "DROP TRIGGER test_refuses_starts;", nil))
	b.waitFor(map[string]string{id: "succeeded"})
	logs.waitFor(t, b.ctx, "job starts are recorded again")
	var refusedLines []string
	for _, line := range logs.snapshot() {
		if strings.HasPrefix(line, "could not record") {
			refusedLines = append(refusedLines, line)
		}
	}
	// One line at the first refusal; the rest counted, in a line per 30 s
	// window and one when the run ended (here usually that one alone).
	const msg = "could not record a job's start; no job starts until the pause is over"
	require.GreaterOrEqual(t, len(refusedLines), 2, "%q", refusedLines)
	require.Equal(t, msg, refusedLines[0])
	counted := 0
	summary := regexp.MustCompile(`^` + regexp.QuoteMeta(msg) + ` \(repeated (\d+) times in \d+s\)$`)
	for _, line := range refusedLines[1:] {
		m := summary.FindStringSubmatch(line)
		require.NotNil(t, m, "%q", line)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		counted += n
	}
	require.Equal(t, int(b.d.Dispatcher.StartsRefused())-1, counted, "every refusal after the first is counted once")
	require.LessOrEqual(t, len(refusedLines), 2+int(time.Since(begin)/(30*time.Second)), "at most a line per 30 s")
}

// recorder is a slog handler that hands each message to a test.
type recorder struct{ lines chan string }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	select {
	case r.lines <- rec.Message:
	default:
	}
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) waitFor(t *testing.T, ctx context.Context, msg string) {
	t.Helper()
	for {
		select {
		case line := <-r.lines:
			if strings.Contains(line, msg) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no log line %q", msg)
		}
	}
}

// collector is a slog handler that keeps every message, for a test to wait
// for one and then look at all of them.
type collector struct {
	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed and replaced when a line arrives
}

func (c *collector) Enabled(context.Context, slog.Level) bool { return true }
func (c *collector) Handle(_ context.Context, rec slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, rec.Message)
	close(c.grew)
	c.grew = make(chan struct{})
	return nil
}
func (c *collector) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *collector) WithGroup(string) slog.Handler      { return c }

func (c *collector) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lines)
}

func (c *collector) waitFor(t *testing.T, ctx context.Context, msg string) {
	t.Helper()
	for {
		c.mu.Lock()
		lines, grew := c.lines, c.grew
		c.mu.Unlock()
		if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, msg) }) {
			return
		}
		select {
		case <-grew:
		case <-ctx.Done():
			t.Fatalf("no log line %q in %q", msg, lines)
		}
	}
}

// A plugin that is not concurrency-safe keeps a counter in its state: each
// job must see the state the one before it left. A worker hands its slot to
// the next job (here often of the same plugin) as its process exits, and
// records that start with its own outcome: the outcome must come first in
// that transaction, or the next job reads the state from before it and two
// jobs count the same n.
func TestEachJobOfASerialPluginSeesTheStateTheLastOneLeft(t *testing.T) {
	b := setup(t, 1, nil) // one worker: its queue cache holds the plugin's next jobs to hand the slot to
	const n = 30
	want := map[string]string{}
	for range n {
		want[b.enqueue("counter")] = "succeeded"
	}
	b.waitFor(want)
	evs, err := b.d.Ledger.ReadStream(b.ctx, events.PluginStream("counter"))
	require.NoError(t, err)
	require.Len(t, evs, n, "one state merge per job")
	for i, ev := range evs {
		var d events.StateMerged
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i+1), string(d.State), "merge %d", i+1)
	}
}

// The same guarantee when the next job of the serial plugin is not in the
// queue's cache when the job before it exits (enqueued while the only slot
// was taken): the dispatch loop, woken at the exit, must not start it until
// the exited job's outcome is recorded. A review found it starting it
// while that outcome's routed children were still being prepared.
func TestASerialPluginsNextJobWaitsForTheOutcomeBeforeIt(t *testing.T) {
	b := setup(t, 1, func(cfg *config.Config) {
		cfg.Routes = append(cfg.Routes, config.Route{From: "slowcounter", EventType: "tick", To: "quick", Command: "poll"})
	})
	const rounds = 5
	for range rounds {
		first, release := b.gated("slowcounter", "")
		b.waitFor(map[string]string{first: "running"})
		second := b.enqueue("slowcounter")
		b.waitFor(map[string]string{first: "running", second: "queued"}) // projected while the only slot is taken
		release()
		b.waitFor(map[string]string{first: "succeeded", second: "succeeded"})
	}
	evs, err := b.d.Ledger.ReadStream(b.ctx, events.PluginStream("slowcounter"))
	require.NoError(t, err)
	require.Len(t, evs, 2*rounds, "one state merge per job")
	for i, ev := range evs {
		var d events.StateMerged
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i+1), string(d.State), "merge %d", i+1)
	}
}
