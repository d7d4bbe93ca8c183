package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// crashConfig: emit's success routes one sink job; both retry.
const crashConfig = `
plugin_roots: ["$PLUGINS"]
service: {max_workers: 2}
plugins:
  emit: {retry: {max_attempts: 4, backoff_base: 50ms}}
  sink: {retry: {max_attempts: 4, backoff_base: 50ms}}
routes:
  - {from: emit, event_type: emit.done, to: sink}
`

// TestCrashRecovery kills a busy daemon with SIGKILL and starts another on
// the same ledger: no job is lost, the jobs the dead one was running are
// recovered (and logged at WARN), every succeeded job has its routed child,
// and the ledger verifies and replays.
//
// A SIGKILL can land between two jobs, leaving nothing to recover: the
// daemon is then started and killed again, until a kill leaves at least one
// job running (the test fails if none of maxKills does). Where exactly the
// kill lands is left to chance here; TestCrashAtFaultPointsBeforeCommit
// places it deterministically.
//
// The test process enqueues the jobs itself, through the commands package
// on the same ledger file, while the daemon runs: it stands in for another
// process (a CLI, the API) enqueuing.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	const (
		roots     = 500
		enqueuers = 5
		killAfter = 100 // root jobs succeeded
		maxKills  = 5
		// A bound on liveness, not a timing claim: on a quiet machine the
		// next daemon drains in a few seconds, but on a loaded one (two CPUs
		// shared with parallel builds) a trivial plugin spawn takes 30 ms+.
		drainLimit = 2 * time.Minute
	)
	w := newJobWorld(t, crashConfig)
	cfg, err := config.Load(w.config)
	require.NoError(t, err)
	ctx := context.Background()
	begin := time.Now()
	first := w.startDaemon()
	l := openLedgerSync(t, w.state, "FULL")

	// Enqueue the roots from a few goroutines while the daemon runs them.
	ids := make([]string, roots)
	errs := make([]error, enqueuers)
	var wg sync.WaitGroup
	for g := range enqueuers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < roots; i += enqueuers {
				enq := commands.JobFor(cfg, "emit", "poll", events.ActorCLI)
				enq.Payload = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
				enq.Now = time.Now()
				res, err := commands.EnqueueJob(ctx, l, enq)
				if err != nil {
					errs[g] = fmt.Errorf("enqueue root %d: %w", i, err)
					return
				}
				ids[i] = res.JobID
			}
		}()
	}
	enqueuedIn := make(chan time.Duration, 1)
	go func() { wg.Wait(); enqueuedIn <- time.Since(begin) }()
	// Kill the daemon once enough roots have succeeded, at a moment when it
	// runs a job (as far as the projections tell). The log, not the
	// projections, says what the dead daemon left running: jobs whose last
	// event is job.started. If it left none, start it again and kill again.
	var atKill map[string]int64
	var orphans map[string]bool
	var killedAt time.Duration
	kills := 0
	for running := first; ; {
		waitFor(t, 30*time.Second, fmt.Sprintf("%d root jobs to succeed and a job to run", killAfter), func() bool {
			atKill = jobCounts(t, l)
			return atKill["emit succeeded"] >= killAfter && atKill["emit running"]+atKill["sink running"] > 0
		})
		require.Equal(t, -1, running.signal(t, syscall.SIGKILL))
		killedAt, kills = time.Since(begin), kills+1
		if orphans = runningInLog(t, l); len(orphans) > 0 {
			break
		}
		require.Less(t, kills, maxKills, "none of %d SIGKILLs left a job running: this test would check nothing", kills)
		running = w.startDaemon()
		requireRecovered(t, running, nil)
	}
	enqueued := <-enqueuedIn
	require.NoError(t, errors.Join(errs...))

	second := w.startDaemon()
	restarted := time.Now()
	requireRecovered(t, second, orphans)

	// Every job ends, and the projections catch up with the log.
	final := waitAllTerminal(t, l, drainLimit)
	drained := time.Since(restarted)
	w.stopDaemon(second)

	// None lost: each root exists once and succeeded, and each has exactly
	// one routed child that succeeded, with the root's payload.
	requireEveryRootSucceededOnceWithItsChild(t, w, ids, final)
	// A recovered job's interrupted attempt counts, and the next one succeeded.
	once := map[string]int{}
	for id := range orphans {
		once[id] = 1
	}
	requireRecoveredAttempts(t, w, once)

	s := stats(t, w.state)
	w.replayAndVerify()
	t.Logf("%d root jobs + %d children; killed the daemon %v in (kill %d), with %d roots succeeded; all roots were enqueued %v in; "+
		"%d jobs recovered; the next daemon finished the rest in %v; %d events",
		roots, roots, killedAt.Round(time.Millisecond), kills, atKill["emit succeeded"], enqueued.Round(time.Millisecond),
		len(orphans), drained.Round(time.Millisecond), s.Events)
}

// requireRecovered requires the daemon p to have logged, at WARN and before
// it started, the recovery of exactly the jobs in want (none if nil).
func requireRecovered(t *testing.T, p *proc, want map[string]bool) {
	t.Helper()
	lines, _ := p.snapshot()
	recovered := map[string]bool{}
	for _, line := range lines {
		var entry struct {
			Level       string `json:"level"`
			Message     string `json:"message"`
			JobID       string `json:"job_id"`
			Attempt     int    `json:"attempt"`
			NextAttempt int    `json:"next_attempt"`
			Status      string `json:"status"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		if entry.Message == "ductile started" {
			break
		}
		if entry.Message == "recovered a job left running by a stopped process" {
			require.Equal(t, "WARN", entry.Level)
			require.Equal(t, "queued", entry.Status, "an attempt before the last is retried")
			require.Equal(t, entry.Attempt+1, entry.NextAttempt)
			recovered[entry.JobID] = true
		}
	}
	if want == nil {
		want = map[string]bool{}
	}
	require.Equal(t, want, recovered, "every job left running is recovered, and logged at WARN, before dispatch")
}

// waitAllTerminal waits until no job is queued or running and the
// projections have caught up with the log, and returns the job counts.
func waitAllTerminal(t *testing.T, l *ledger.Ledger, limit time.Duration) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var final map[string]int64
	waitFor(t, limit, "every job to be terminal", func() bool {
		final = jobCounts(t, l)
		if final["emit queued"]+final["emit running"]+final["sink queued"]+final["sink running"] > 0 {
			return false
		}
		head, err := l.LastSeq(ctx)
		require.NoError(t, err)
		cp, err := projections.ReadCheckpoint(ctx, l)
		require.NoError(t, err)
		return cp == head
	}, func() string { return fmt.Sprintf("counts: %v", final) })
	return final
}

// requireEveryRootSucceededOnceWithItsChild requires each root (ids[i] has
// payload {"n":i}) to exist once and have succeeded, with exactly one routed
// sink child that succeeded with the root's payload, and no other job.
func requireEveryRootSucceededOnceWithItsChild(t *testing.T, w *jobWorld, ids []string, counts map[string]int64) {
	t.Helper()
	jobs := w.jobList("--limit", "100000")
	byID := map[string]jobView{}
	children := map[string][]jobView{}
	for _, j := range jobs {
		byID[j.ID] = j
		if j.ParentJobID != nil {
			children[*j.ParentJobID] = append(children[*j.ParentJobID], j)
		}
	}
	require.Len(t, jobs, 2*len(ids), "counts: %v", counts)
	for i, id := range ids {
		root, ok := byID[id]
		require.True(t, ok, "root %d (%s) is lost", i, id)
		require.Equal(t, "emit", root.Plugin)
		require.Equal(t, "succeeded", root.Status, "root %d", i)
		require.Nil(t, root.ParentJobID)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(root.Payload))
		kids := children[id]
		require.Len(t, kids, 1, "root %d (%s) succeeded: it has its routed child, once", i, id)
		kid := kids[0]
		require.Equal(t, "sink", kid.Plugin)
		require.Equal(t, "handle", kid.Command)
		require.Equal(t, "succeeded", kid.Status)
		require.Equal(t, "route", kid.SubmittedBy)
		require.NotNil(t, kid.SourceEventID)
		require.Equal(t, id, kid.CorrelationID)
		require.JSONEq(t, string(root.Payload), string(kid.Payload))
	}
}

// requireRecoveredAttempts requires each job in orphaned (orphaned[id]: how
// many times a dead process left it running) to have that many recovered
// attempts, each counted, followed by one that succeeded.
func requireRecoveredAttempts(t *testing.T, w *jobWorld, orphaned map[string]int) {
	t.Helper()
	for id, times := range orphaned {
		in := w.inspect(id)
		require.Equal(t, "succeeded", in.Job.Status)
		require.Equal(t, times+1, in.Job.Attempt)
		var attempts []string
		for _, a := range in.Attempts {
			attempts = append(attempts, a.Status)
		}
		want := append(slices.Repeat([]string{"recovered"}, times), "succeeded")
		require.Equal(t, want, attempts, "job %s", id)
	}
}

// jobCounts counts jobs by "plugin status", from the projections.
func jobCounts(t *testing.T, l *ledger.Ledger) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	err := l.Read(context.Background(), func(conn *sqlite.Conn) error {
		return queries.ListJobs(conn, queries.ListJobsParams{Plugin: "", BeforeSeq: math.MaxInt64, MaxJobs: 1 << 20}, func(r queries.ListJobsRow) error {
			counts[r.Plugin+" "+r.Status]++
			return nil
		})
	})
	require.NoError(t, err)
	return counts
}

// runningInLog returns the jobs whose stream ends with job.started: the
// ones a process was running when it died.
func runningInLog(t *testing.T, l *ledger.Ledger) map[string]bool {
	t.Helper()
	last := map[string]string{}
	for _, ev := range readAll(t, l) {
		last[ev.Stream] = ev.Type
	}
	running := map[string]bool{}
	for stream, typ := range last {
		if id := events.JobIDFromStream(stream); id != "" && typ == events.JobStarted {
			running[id] = true
		}
	}
	return running
}

// TestCrashAtFaultPointsBeforeCommit kills the daemon at the ledger's fault
// point (ledger.Options.BeforeCommit: the decision is made and its events
// are inserted, COMMIT has not run), at two chosen moments, so what
// TestCrashRecovery leaves to chance is checked on every run:
//
//   - inside the transaction that records a routing success: none of it is
//     in the log, so that job is left running (an orphan there must be), and
//     nothing it routed is in the log (a completion that appended its
//     children before its success would leave them behind);
//   - inside the transaction right after one that recorded a routing
//     success: the success is in the log with its routed child (a
//     completion that appended its children after its success would lose
//     them).
//
// Each killed daemon is this test binary run as a child (faultDaemon), the
// daemon assembled by daemon.Run as `system start` does; the next daemon
// recovers what it left running, and the real binary finishes the rest.
func TestCrashAtFaultPointsBeforeCommit(t *testing.T) {
	t.Parallel()
	const (
		roots = 60
		// A bound on liveness, not a timing claim: on a quiet machine the
		// next daemon drains in a few seconds, but on a loaded one (two CPUs
		// shared with parallel builds) a trivial plugin spawn takes 30 ms+.
		drainLimit = 2 * time.Minute
	)
	w := newJobWorld(t, crashConfig)
	cfg, err := config.Load(w.config)
	require.NoError(t, err)
	ctx := context.Background()
	l := openLedgerSync(t, w.state, "FULL")
	ids := make([]string, roots)
	for i := range ids {
		enq := commands.JobFor(cfg, "emit", "poll", events.ActorCLI)
		enq.Payload = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		enq.Now = time.Now()
		res, err := commands.EnqueueJob(ctx, l, enq)
		require.NoError(t, err)
		ids[i] = res.JobID
	}

	// Given a daemon that has recorded 10 routing successes, when it is
	// killed inside the transaction that records the next one,
	_, in := w.runFaultDaemon("in", 10)
	// then none of that transaction is in the log,
	requireLogEndsBefore(t, l, in.FirstSeq)
	// the jobs whose success it held are left running, with no child.
	orphans1 := runningInLog(t, l)
	children := childrenInLog(t, l)
	require.NotEmpty(t, in.Jobs)
	for _, id := range in.Jobs {
		require.True(t, orphans1[id], "job %s, whose success was not committed, is left running", id)
		require.Empty(t, children[id], "job %s's success was not committed, but a job it routed was", id)
	}

	// Given the next daemon, which recovers exactly those jobs and records 5
	// routing successes, when it is killed in the transaction right after
	// one that committed a routing success,
	next, after := w.runFaultDaemon("after", 5)
	requireRecovered(t, next, orphans1)
	requireLogEndsBefore(t, l, after.FirstSeq)
	// then that success is in the log with its routed child.
	children = childrenInLog(t, l)
	last := map[string]string{}
	for _, ev := range readAll(t, l) {
		last[ev.Stream] = ev.Type
	}
	require.NotEmpty(t, after.Jobs)
	for _, id := range after.Jobs {
		require.Equal(t, events.JobSucceeded, last[events.JobStream(id)], "job %s", id)
		require.Len(t, children[id], 1, "job %s's success is committed: so is its routed child, once", id)
	}
	orphans2 := runningInLog(t, l)

	// The real daemon recovers what the second one left running and
	// finishes every job: none lost, none doubled, each recovered attempt
	// counted.
	final := w.startDaemon()
	requireRecovered(t, final, orphans2)
	counts := waitAllTerminal(t, l, drainLimit)
	w.stopDaemon(final)
	requireEveryRootSucceededOnceWithItsChild(t, w, ids, counts)
	orphaned := map[string]int{}
	for _, set := range []map[string]bool{orphans1, orphans2} {
		for id := range set {
			orphaned[id]++
		}
	}
	requireRecoveredAttempts(t, w, orphaned)
	w.replayAndVerify()
	t.Logf("first kill in seqs %d..%d (successes of %v), %d orphans; second kill in seqs %d..%d (after successes of %v), %d orphans",
		in.FirstSeq, in.LastSeq, in.Jobs, len(orphans1), after.FirstSeq, after.LastSeq, after.Jobs, len(orphans2))
}

// faultDaemonEnv, set only by runFaultDaemon for a child of this test
// binary, makes TestMain run faultDaemon instead of the tests.
const faultDaemonEnv = "CRASH_E2E_FAULT_DAEMON"

// faultSpec tells a fault daemon where to run and where to kill itself.
type faultSpec struct {
	// Mode "in": kill inside the first transaction holding a routing
	// success (a job.succeeded whose response has an emit.done event);
	// "after": inside the first transaction after one that held one.
	Mode string `json:"mode"`
	// After is how many routing successes the process records first.
	After    int    `json:"after"`
	StateDir string `json:"state_dir"`
	Config   string `json:"config"`
}

// faultLine is what a fault daemon prints right before it kills itself.
type faultLine struct {
	Fault    string   `json:"fault"`     // the mode
	Jobs     []string `json:"jobs"`      // the routing successes: in this transaction ("in"), in the one before ("after")
	FirstSeq int64    `json:"first_seq"` // the transaction killed
	LastSeq  int64    `json:"last_seq"`
}

// faultDaemon runs a daemon as `system start` does (daemon.Run, logging
// JSON lines to stdout), with a fault point that SIGKILLs the process inside
// an append transaction, before COMMIT, as spec says.
func faultDaemon(spec string) int {
	var f faultSpec
	if err := json.Unmarshal([]byte(spec), &f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := config.Load(f.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	seen := 0             // routing successes recorded
	var previous []string // the routing successes of the last transaction
	// Called on the writer goroutine only: no lock.
	beforeCommit := func(appended []ledger.Event) {
		routed := routingSuccesses(appended)
		var fire []string
		switch {
		case seen < f.After:
		case f.Mode == "in":
			fire = routed
		case f.Mode == "after":
			fire = previous
		}
		if len(fire) > 0 {
			line, _ := json.Marshal(faultLine{Fault: f.Mode, Jobs: fire, FirstSeq: appended[0].Seq, LastSeq: appended[len(appended)-1].Seq})
			os.Stdout.Write(append(line, '\n')) // one write, beside the logger's
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal ends the process; nothing commits meanwhile
		}
		seen += len(routed)
		previous = routed
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = daemon.Run(ctx, daemon.Options{
		StateDir: f.StateDir, Config: cfg, Logger: daemon.NewLogger(os.Stdout, slog.LevelInfo),
		Ledger: ledger.Options{BeforeCommit: beforeCommit},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0 // stopped without reaching the fault point: the test fails
}

// routingSuccesses returns the jobs whose job.succeeded in evs has a
// response with an emit.done event (the event crashConfig routes).
func routingSuccesses(evs []ledger.Event) []string {
	var ids []string
	for _, ev := range evs {
		if ev.Type != events.JobSucceeded {
			continue
		}
		var d struct {
			Response struct {
				Events []struct {
					Type string `json:"type"`
				} `json:"events"`
			} `json:"response"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		for _, e := range d.Response.Events {
			if e.Type == "emit.done" {
				ids = append(ids, events.JobIDFromStream(ev.Stream))
				break
			}
		}
	}
	return ids
}

// runFaultDaemon runs a fault daemon (faultDaemon) on this world and
// returns it, and what it printed at its fault point, once it has died
// there of SIGKILL.
func (w *jobWorld) runFaultDaemon(mode string, after int) (*proc, faultLine) {
	w.t.Helper()
	spec, err := json.Marshal(faultSpec{Mode: mode, After: after, StateDir: w.state, Config: w.config})
	require.NoError(w.t, err)
	p := startProcess(w.t, cleanEnv(w.t, faultDaemonEnv+"="+string(spec)), os.Args[0], "-test.run=^$")
	<-p.done // bounded by the process's own time limit (procTimeout)
	lines, _ := p.snapshot()
	var fault faultLine
	for _, line := range lines {
		var f faultLine
		if json.Unmarshal([]byte(line), &f) == nil && f.Fault != "" {
			fault = f
		}
	}
	require.Equal(w.t, mode, fault.Fault, "the daemon reached its fault point (%s after %d routing successes); exit %d\nstdout:\n%s\nstderr:\n%s",
		mode, after, p.cmd.ProcessState.ExitCode(), strings.Join(lines, "\n"), p.stderr.String())
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(w.t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the daemon died of SIGKILL at its fault point")
	return p, fault
}

// requireLogEndsBefore requires the log to end right before seq: nothing of
// the transaction a fault killed was committed.
func requireLogEndsBefore(t *testing.T, l *ledger.Ledger, seq int64) {
	t.Helper()
	head, err := l.LastSeq(context.Background())
	require.NoError(t, err)
	require.Equal(t, seq-1, head, "the log ends right before the transaction the fault killed")
}

// childrenInLog maps each job to the jobs enqueued with it as their parent.
func childrenInLog(t *testing.T, l *ledger.Ledger) map[string][]string {
	t.Helper()
	children := map[string][]string{}
	for _, ev := range readAll(t, l) {
		if ev.Type != events.JobEnqueued {
			continue
		}
		var d events.Enqueued
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if d.ParentJobID != "" {
			children[d.ParentJobID] = append(children[d.ParentJobID], d.JobID)
		}
	}
	return children
}
