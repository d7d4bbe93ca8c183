package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/dispatch"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// TestCrashRecovery kills a busy daemon with SIGKILL and starts another on
// the same ledger: no job is lost, the jobs the dead one was running are
// recovered (and logged at WARN), every succeeded job has its routed child,
// and the ledger verifies and replays.
//
// The test process enqueues the jobs itself, through the commands package
// on the same ledger file, while the daemon runs: it stands in for another
// process (a CLI, the API) enqueuing.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	const (
		roots      = 500
		enqueuers  = 5
		killAfter  = 100 // root jobs succeeded
		drainLimit = 35 * time.Second
	)
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
service: {max_workers: 2}
plugins:
  emit: {retry: {max_attempts: 4, backoff_base: 50ms}}
  sink: {retry: {max_attempts: 4, backoff_base: 50ms}}
routes:
  - {from: emit, event_type: emit.done, to: sink}
`)
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
				enq := dispatch.JobFor(cfg, "emit", "poll", commands.ByCLI)
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
	// runs a job (as far as the projections tell).
	var atKill map[string]int64
	waitFor(t, 30*time.Second, fmt.Sprintf("%d root jobs to succeed", killAfter), func() bool {
		atKill = jobCounts(t, l)
		return atKill["emit succeeded"] >= killAfter && atKill["emit running"]+atKill["sink running"] > 0
	})
	require.Equal(t, -1, first.signal(t, syscall.SIGKILL))
	killedAt := time.Since(begin)
	enqueued := <-enqueuedIn
	require.NoError(t, errors.Join(errs...))

	// The log, not the lagging projections, says what the dead daemon left
	// running: jobs whose last event is job.started.
	orphans := runningInLog(t, l)

	second := w.startDaemon()
	restarted := time.Now()
	lines, _ := second.snapshot()
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
		if entry.Message == "recovered a job left running by a stopped process" {
			require.Equal(t, "WARN", entry.Level)
			require.Equal(t, "queued", entry.Status, "a first attempt is retried")
			require.Equal(t, entry.Attempt+1, entry.NextAttempt)
			recovered[entry.JobID] = true
		}
	}
	require.Equal(t, orphans, recovered, "every job left running is recovered, and logged at WARN, before dispatch")

	// Every job ends, and the projections catch up with the log.
	var final map[string]int64
	waitFor(t, drainLimit, "every job to be terminal", func() bool {
		final = jobCounts(t, l)
		if final["emit queued"]+final["emit running"]+final["sink queued"]+final["sink running"] > 0 {
			return false
		}
		head, err := l.LastSeq(ctx)
		require.NoError(t, err)
		cp, err := projections.ReadCheckpoint(ctx, l)
		require.NoError(t, err)
		return cp == head
	})
	drained := time.Since(restarted)
	w.stopDaemon(second)

	// None lost: each root exists once and succeeded, and each has exactly
	// one routed child that succeeded, with the root's payload.
	jobs := w.jobList("--limit", "100000")
	byID := map[string]jobView{}
	children := map[string][]jobView{}
	for _, j := range jobs {
		byID[j.ID] = j
		if j.ParentJobID != nil {
			children[*j.ParentJobID] = append(children[*j.ParentJobID], j)
		}
	}
	require.Len(t, jobs, 2*roots, "counts: %v", final)
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
	// A recovered job's interrupted attempt counts, and the next one succeeded.
	for id := range orphans {
		in := w.inspect(id)
		require.Equal(t, "succeeded", in.Job.Status)
		require.Equal(t, 2, in.Job.Attempt)
		var attempts []string
		for _, a := range in.Attempts {
			attempts = append(attempts, a.Status)
		}
		require.Equal(t, []string{"recovered", "succeeded"}, attempts, "job %s", id)
	}

	s := stats(t, w.state)
	w.replayAndVerify()
	t.Logf("%d root jobs + %d children; killed the daemon %v in, with %d roots succeeded; all roots were enqueued %v in; "+
		"%d jobs recovered; the second daemon finished the rest in %v; %d events",
		roots, roots, killedAt.Round(time.Millisecond), atKill["emit succeeded"], enqueued.Round(time.Millisecond),
		len(orphans), drained.Round(time.Millisecond), s.Events)
}

// jobCounts counts jobs by "plugin status", from the projections.
func jobCounts(t *testing.T, l *ledger.Ledger) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	err := l.Read(context.Background(), func(conn *sqlite.Conn) error {
		return queries.ListJobs(conn, queries.ListJobsParams{Status: "", Plugin: "", MaxJobs: 1 << 20}, func(r queries.ListJobsRow) error {
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
