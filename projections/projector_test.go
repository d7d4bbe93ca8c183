package projections_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openLedger(t testing.TB, name string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), name), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// generate appends at least n events through a random mix of real job
// lifecycles (enqueue, start, succeed with state or facts and routed
// children, fail, retry, time out, recover, cancel, dedupe) and opaque
// filler events on random streams, calling between after each step.
func generate(t testing.TB, l *ledger.Ledger, rng *rand.Rand, n int64, between func()) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plugins := []string{"echo", "fetch", "notify"}
	var queued, running []string
	take := func(list *[]string) string {
		i := rng.IntN(len(*list))
		id := (*list)[i]
		(*list)[i] = (*list)[len(*list)-1]
		*list = (*list)[:len(*list)-1]
		return id
	}
	randObj := func() json.RawMessage {
		words := []string{"alpha", "βeta", "gamma 🚀", `quote"d`, "back\\slash", "new\nline", ""}
		b, _ := json.Marshal(map[string]any{
			fmt.Sprintf("k%d", rng.IntN(5)): rng.Int64N(1 << 40),
			"price":                         json.Number(fmt.Sprintf("%d.50", rng.IntN(100))),
			"word":                          words[rng.IntN(len(words))],
			"nested":                        map[string]any{"ok": rng.IntN(2) == 0, "list": []int{rng.IntN(9)}},
		})
		return b
	}
	enqueue := func() commands.Enqueue {
		cmd := commands.Enqueue{
			Plugin: plugins[rng.IntN(len(plugins))], Command: []string{"poll", "handle"}[rng.IntN(2)],
			Payload: randObj(), SubmittedBy: []events.Actor{events.ActorCLI, events.ActorScheduler}[rng.IntN(2)], MaxAttempts: 1 + rng.IntN(3),
			BackoffBase: time.Second, DefaultDedupeTTL: time.Hour, Now: now,
		}
		if rng.IntN(4) == 0 {
			cmd.TaskID, cmd.TraceID = fmt.Sprintf("task-%d", rng.IntN(30)), "trace"
		}
		if rng.IntN(5) == 0 {
			cmd.DedupeKey = fmt.Sprintf("key-%d", rng.IntN(20))
			if rng.IntN(2) == 0 {
				cmd.DedupeTTL = time.Minute
			}
		}
		return cmd
	}
	for {
		last, err := l.LastSeq(ctx)
		require.NoError(t, err)
		if last >= n {
			return
		}
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		switch r := rng.IntN(100); {
		case r < 15: // opaque filler, batched
			batch := make([]ledger.NewEvent, 1+rng.IntN(200))
			for i := range batch {
				batch[i] = ledger.NewEvent{Stream: fmt.Sprintf("misc/%d", rng.IntN(5000)), ExpectedVersion: ledger.AnyVersion,
					Type: fmt.Sprintf("test.kind%d", rng.IntN(12)), Data: randObj(),
					Meta: ledger.Meta{CorrelationID: fmt.Sprintf("c%d", rng.IntN(100)), Actor: "generator"}}
			}
			_, err = l.Append(ctx, batch...)
			require.NoError(t, err)
		case r < 40 || len(queued)+len(running) == 0:
			res, err := commands.EnqueueJob(ctx, l, enqueue())
			require.NoError(t, err)
			if !res.Deduped {
				queued = append(queued, res.JobID)
			}
		case r < 62 && len(queued) > 0:
			id := take(&queued)
			_, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, Now: now.Add(time.Hour)})
			if err == nil {
				running = append(running, id)
			} else if !errors.Is(err, commands.ErrInvalidTransition) {
				require.NoError(t, err)
			}
		case r < 92 && len(running) > 0:
			id := take(&running)
			out := commands.Outcome{Kind: events.OutcomeOK, Duration: time.Duration(rng.IntN(900)) * time.Millisecond, Stderr: "some stderr"}
			var facts []commands.FactRule
			var children []commands.Enqueue
			switch rng.IntN(6) {
			case 0:
				out = commands.Outcome{Kind: events.OutcomeError, Retryable: rng.IntN(4) > 0, Error: "boom", ExitCode: 1}
			case 1:
				out = commands.Outcome{Kind: events.OutcomeTimeout, Retryable: true, Error: "timed out", ExitCode: -1}
			default:
				out.Response = []byte(`{"status":"ok","result":"done"}`)
				out.StateUpdates = randObj()
				if rng.IntN(3) == 0 {
					facts = []commands.FactRule{{FactType: "snapshot", View: "mirror_object"}}
				}
				for range rng.IntN(3) {
					children = append(children, enqueue())
				}
			}
			attempt := attemptOf(t, l, id)
			if rng.IntN(3) == 0 { // the Run protocol's reports
				p := float64(rng.IntN(101)) / 100
				err := commands.RecordProgress(ctx, l, commands.Progress{JobID: id, Attempt: attempt, Progress: events.Progressed{Progress: &p, Stage: "s", Lines: 1}})
				if err != nil && !errors.Is(err, commands.ErrInvalidTransition) {
					require.NoError(t, err)
				}
				_, _, err = commands.RecordExport(ctx, l, commands.Export{JobID: id, Attempt: attempt, Item: events.Exported{Type: events.ExportText, Text: "out"}})
				if err != nil && !errors.Is(err, commands.ErrInvalidTransition) {
					require.NoError(t, err)
				}
			}
			res, err := commands.CompleteJob(ctx, l, commands.Complete{JobID: id, Attempt: attempt, Outcome: out, Facts: facts, Children: children, Now: now})
			if errors.Is(err, commands.ErrInvalidTransition) {
				continue // canceled meanwhile
			}
			require.NoError(t, err)
			if res.Status == "queued" {
				queued = append(queued, id)
			}
			for _, c := range res.Children {
				if !c.Deduped {
					queued = append(queued, c.JobID)
				}
			}
		case r < 96 && len(running) > 0:
			id := take(&running)
			res, err := commands.RecoverJob(ctx, l, commands.Recover{JobID: id, Now: now})
			require.NoError(t, err)
			if res.Status == "queued" {
				queued = append(queued, id)
			}
		default:
			list := &queued
			if len(running) > 0 && rng.IntN(2) == 0 {
				list = &running
			}
			if len(*list) == 0 {
				continue
			}
			id := (*list)[rng.IntN(len(*list))]
			status, err := commands.CancelJob(ctx, l, commands.Cancel{JobID: id, Now: now})
			require.NoError(t, err)
			if status == "canceled" {
				for i, q := range queued {
					if q == id {
						queued = append(queued[:i], queued[i+1:]...)
						break
					}
				}
			}
		}
		if between != nil {
			between()
		}
	}
}

func attemptOf(t testing.TB, l *ledger.Ledger, id string) int {
	evs, err := l.ReadStream(context.Background(), "job/"+id)
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	return j.Attempt
}

func catchUp(t testing.TB, p *projections.Projector) {
	t.Helper()
	for {
		n, err := p.RunOnce(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return
		}
	}
}

func dump(t testing.TB, l *ledger.Ledger) ([]byte, int64) {
	t.Helper()
	var buf bytes.Buffer
	cp, err := projections.Dump(context.Background(), l, &buf)
	require.NoError(t, err)
	return buf.Bytes(), cp
}

// TestReplayIsExact projects 100,000 random events incrementally, in odd
// batch sizes interleaved with the appends, then rebuilds from scratch: the
// canonical dumps must be byte-identical. A copy of the log as of seq 50,000
// must project exactly what the generator knows it had written by then.
func TestReplayIsExact(t *testing.T) {
	total, mid := 100_000, int64(50_000)
	if testing.Short() { // the race detector run: same test, smaller log
		total, mid = 10_000, 5_000
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	ctx := context.Background()
	l := openLedger(t, "ductile.db")
	p := projections.New(l, projections.Options{BatchSize: 777})

	generate(t, l, rng, int64(total), func() {
		for range rng.IntN(3) {
			_, err := p.RunOnce(ctx)
			require.NoError(t, err)
		}
	})
	catchUp(t, p)
	incremental, cp := dump(t, l)
	head, err := l.LastSeq(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, head, int64(total))
	require.Equal(t, head, cp)

	rebuilt, err := projections.Rebuild(ctx, l, 0)
	require.NoError(t, err)
	require.Equal(t, head, rebuilt)
	replayed, cp := dump(t, l)
	require.Equal(t, head, cp)
	require.True(t, bytes.Equal(incremental, replayed), "replay differs from incremental projection")

	// Compare reports no mismatch against a fresh replay in another file.
	mismatch, err := projections.Compare(ctx, l, openLedger(t, "scratch.db"), nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)

	// The projections hold what the log says, folded independently.
	checkAgainstLog(t, l, l, head)

	// Time travel: a copy as of seq 50,000 projects the generator's state then.
	past := openLedger(t, "past.db")
	copied, err := projections.CopyLog(ctx, l, past, mid, nil)
	require.NoError(t, err)
	require.Equal(t, mid, copied)
	_, err = projections.Rebuild(ctx, past, 0)
	require.NoError(t, err)
	checkAgainstLog(t, past, l, mid)
	res, err := past.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Equal(t, mid, res.LastSeq)
}

// checkAgainstLog compares l's projections with what src's raw log says up
// to seq until: every job's status and attempt folded by the write side's
// own FoldJob.
func checkAgainstLog(t *testing.T, l, src *ledger.Ledger, until int64) {
	t.Helper()
	ctx := context.Background()
	jobEvents := map[string][]ledger.Event{}
	var after int64
	for after < until {
		last, err := src.ReadFrom(ctx, after, int(min(4096, until-after)), ledger.Filter{}, func(ev ledger.Event) error {
			if id, ok := strings.CutPrefix(ev.Stream, "job/"); ok {
				jobEvents[id] = append(jobEvents[id], ev)
			}
			return nil
		})
		require.NoError(t, err)
		after = last
	}
	wantJobs := map[string]string{}
	wantTotals := map[string]int64{}
	wantRuns := map[string]string{}
	for id, evs := range jobEvents {
		j, err := commands.FoldJob(evs)
		require.NoError(t, err)
		wantJobs[id] = fmt.Sprintf("%s/%d", j.Status, j.Attempt)
		r, err := views.FoldRunRecord(evs)
		require.NoError(t, err)
		wantRuns[id] = runLine(string(r.Status), r.TaskID, r.Progress, r.ExportsCount)
		if j.Terminal() {
			wantTotals[j.Plugin+"/"+string(j.Status)]++
		}
	}

	out, _ := dump(t, l)
	jobs := map[string]string{}
	runs := map[string]string{}
	totals := map[string]int64{}
	section := ""
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if bytes.HasPrefix(line, []byte("## ")) {
			section = string(line[3:])
			continue
		}
		if section == "job_totals" {
			var row struct {
				Plugin, Status string
				N              int64
			}
			require.NoError(t, json.Unmarshal(line, &row))
			totals[row.Plugin+"/"+row.Status] = row.N
			continue
		}
		if section != "job_queue" {
			continue
		}
		var row struct {
			ID           string
			Status       string
			Attempt      int64
			TimedOut     int64
			TaskID       *string
			Progress     *float64
			ExportsCount int
		}
		require.NoError(t, json.Unmarshal(line, &row))
		jobs[row.ID] = fmt.Sprintf("%s/%d", row.Status, row.Attempt)
		status := views.RunStatusOf(events.Status(row.Status), row.TimedOut == 1)
		runs[row.ID] = runLine(string(status), row.TaskID, row.Progress, row.ExportsCount)
	}
	require.Equal(t, wantJobs, jobs)
	require.Equal(t, wantRuns, runs, "job_queue holds each job's run status, task, progress and export count")
	// Every job that ended counts once in job_totals (nothing is archived).
	require.Equal(t, wantTotals, totals)
	require.Contains(t, totals, "echo/succeeded")
	require.Greater(t, int64(len(jobs)), until/200, "the generator ran real job lifecycles")
}

// startedProjector opens a ledger with a started projector that follows it,
// under a context that bounds the test.
func startedProjector(t *testing.T) (context.Context, *ledger.Ledger, *projections.Projector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	l := openLedger(t, "ductile.db")
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	t.Cleanup(p.Stop) // before the ledger closes: cleanups run last first
	return ctx, l, p
}

func TestProjectorFollowsCommitsWithoutPolling(t *testing.T) {
	ctx, l, p := startedProjector(t)

	for i := range 20 {
		seqs, err := l.Append(ctx, ledger.NewEvent{Stream: fmt.Sprintf("s/%d", i), Type: "t.happened"})
		require.NoError(t, err)
		require.NoError(t, p.WaitFor(ctx, seqs[0]))
	}

	// An append by another connection (as another process would) is picked
	// up through the file, not through this ledger's own notification.
	other, err := ledger.Open(ctx, l.Path(), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer other.Close()
	require.True(t, l.Watching(), "without the WAL watcher the projector looks once a second")
	seqs, err := other.Append(ctx, ledger.NewEvent{Stream: "elsewhere", Type: "t.happened"})
	require.NoError(t, err)
	// With the watcher there is no once-a-second look at all: only its
	// wake-up can bring the projector to this append before the deadline.
	require.NoError(t, p.WaitFor(ctx, seqs[0]))

	lag, err := p.Lag(ctx)
	require.NoError(t, err)
	require.Equal(t, projections.Lag{Checkpoint: 21, Head: 21}, lag)
}

func TestCompareFindsADriftedProjection(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t, "ductile.db")
	generate(t, l, rand.New(rand.NewPCG(1, 2)), 2000, nil)
	catchUp(t, projections.New(l, projections.Options{}))

	// Given projections that drifted from the log (edited behind the
	// projector's back, as a bug or a hand edit would),
	conn, err := sqlite.OpenConn(l.Path(), sqlite.OpenReadWrite)
	require.NoError(t, err)
	script, err := os.ReadFile(filepath.Join("testdata", "drift.sql"))
	require.NoError(t, err)
	require.NoError(t, sqlitex.ExecuteScript(conn, string(script), nil))
	require.NoError(t, conn.Close())

	// when compared with a fresh replay, the first drifted row is reported.
	mismatch, err := projections.Compare(ctx, l, openLedger(t, "scratch.db"), nil)
	require.NoError(t, err)
	require.NotNil(t, mismatch)
	require.Equal(t, "job_queue", mismatch.Projection)
	require.GreaterOrEqual(t, mismatch.Checkpoint, int64(2000))
	require.Contains(t, mismatch.Live, `"Attempt":10`)
	require.NotContains(t, mismatch.Replayed, `"Attempt":10`)

	// and a rebuild repairs it.
	_, err = projections.Rebuild(ctx, l, 0)
	require.NoError(t, err)
	mismatch, err = projections.Compare(ctx, l, openLedger(t, "scratch2.db"), nil)
	require.NoError(t, err)
	require.Nil(t, mismatch)
}

// Reached fires once a type's count reaches the threshold, at once if it
// already has, never before; SeenChanged fires at the next event of a type.
func TestReachedAndSeenChanged(t *testing.T) {
	ctx, l, p := startedProjector(t)

	three := p.Reached(ctx, "t.counted", 3)
	other := p.Reached(ctx, "t.other", 1)
	next := p.SeenChanged("t.counted")
	appendOne := func(typ string) {
		t.Helper()
		seqs, err := l.Append(ctx, ledger.NewEvent{Stream: "s/" + typ, ExpectedVersion: ledger.AnyVersion, Type: typ})
		require.NoError(t, err)
		require.NoError(t, p.WaitFor(ctx, seqs[0]))
	}
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	appendOne("t.counted")
	require.True(t, isClosed(next), "the next t.counted was applied")
	require.False(t, isClosed(three))
	appendOne("t.counted")
	require.False(t, isClosed(three), "two of three")
	appendOne("t.counted")
	require.True(t, isClosed(three), "three of three")
	require.False(t, isClosed(other), "no t.other was applied")
	require.True(t, isClosed(p.Reached(ctx, "t.counted", 2)), "already reached")
	appendOne("t.other")
	require.True(t, isClosed(other))
}

// runLine is what checkAgainstLog compares of a run.
func runLine(status string, task *string, progress *float64, exports int) string {
	p, tk := "-", "-"
	if progress != nil {
		p = fmt.Sprint(*progress)
	}
	if task != nil {
		tk = *task
	}
	return fmt.Sprintf("%s/%s/%s/%d", status, tk, p, exports)
}
