package projections_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// TestInlineProjectionIsExact runs real producers against a ledger whose
// projector is started, as the daemon's is: this process's appends are
// projected inline, in their own append transactions, and another Ledger on
// the same file (another process: a CLI enqueuing or canceling) appends
// meanwhile, which the inline projection and the projector's goroutine pick
// up from the file. What was projected that way must be byte for byte what a
// fresh rebuild of the same log projects. (TestReplayIsExact never starts the
// projector, so it cannot see a bug in the inline path.)
func TestInlineProjectionIsExact(t *testing.T) {
	producers, steps := 4, 600
	if testing.Short() {
		producers, steps = 3, 200
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	warnings := &warningLog{}
	logger := slog.New(warnings)
	daemon, err := ledger.Open(ctx, t.TempDir()+"/ductile.db", ledger.Options{Synchronous: "NORMAL", Logger: logger})
	require.NoError(t, err)
	defer func() { require.NoError(t, daemon.Close()) }()
	other, err := ledger.Open(ctx, daemon.Path(), ledger.Options{Synchronous: "NORMAL", Logger: logger})
	require.NoError(t, err)
	defer func() { require.NoError(t, other.Close()) }()
	p := projections.New(daemon, projections.Options{Logger: logger})
	p.Start(ctx)
	stopped := false
	defer func() {
		if !stopped {
			p.Stop()
		}
	}()

	// Given producers that drive job lifecycles through both ledgers at once,
	var wg sync.WaitGroup
	failures := make([]error, producers)
	viaOther := make([]int, producers)
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := &producer{
				rng: rand.New(rand.NewPCG(seed, uint64(i))), daemon: daemon, other: other, p: p,
				name: fmt.Sprintf("producer %d", i), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			}
			failures[i] = pr.run(ctx, steps)
			viaOther[i] = pr.viaOther
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(failures...), "seed %d", seed)

	// when the projector has caught up with the other ledger's last appends,
	head, err := daemon.LastSeq(ctx)
	require.NoError(t, err)
	require.NoError(t, p.WaitFor(ctx, head), "seed %d", seed)
	p.Stop()
	stopped = true
	require.Empty(t, warnings.messages(), "seed %d: the inline projection failed; what the goroutine projected instead is not what this test is about", seed)

	// then what was projected live is exactly what a fresh rebuild of the
	// same log projects.
	var live bytes.Buffer
	cp, err := projections.Dump(ctx, daemon, &live)
	require.NoError(t, err)
	require.Equal(t, head, cp, "seed %d", seed)
	fresh := openLedger(t, "fresh.db")
	copied, err := projections.CopyLog(ctx, daemon, fresh, head, nil)
	require.NoError(t, err)
	require.Equal(t, head, copied)
	rebuilt, err := projections.Rebuild(ctx, fresh, 0)
	require.NoError(t, err)
	require.Equal(t, head, rebuilt)
	var replayed bytes.Buffer
	_, err = projections.Dump(ctx, fresh, &replayed)
	require.NoError(t, err)
	if line, live, replayed := firstDifference(live.Bytes(), replayed.Bytes()); line > 0 {
		t.Fatalf("seed %d: the inline projection differs from a rebuild of the same %d events at dump line %d:\nlive:    %s\nrebuilt: %s",
			seed, head, line, live, replayed)
	}

	// The workload covered every event the projections apply, from both
	// ledgers, and did real work (not a log of enqueues alone).
	types := map[string]int{}
	_, err = daemon.ReadFrom(ctx, 0, int(head), ledger.Filter{}, func(ev ledger.Event) error {
		types[ev.Type]++
		return nil
	})
	require.NoError(t, err)
	for _, typ := range []string{
		events.JobEnqueued, events.JobStarted, events.JobSucceeded, events.JobFailed, events.JobTimedOut,
		events.JobRetryScheduled, events.JobDead, events.JobCancelRequested, events.JobCanceled, events.JobRecovered,
		events.PluginFactRecorded, events.PluginStateMerged, events.DedupeReserved, events.DedupeReleased,
	} {
		require.Positive(t, types[typ], "seed %d: no %s in the log (%v)", seed, typ, types)
	}
	sum := 0
	for _, n := range viaOther {
		sum += n
	}
	require.Positive(t, sum, "seed %d: the other ledger appended nothing", seed)
	require.Contains(t, live.String(), `"Stderr":"`, "seed %d: no attempt kept its stderr", seed)
	t.Logf("%d events (%d steps through the other ledger); %v", head, sum, types)
}

// producer drives random job lifecycles, mostly through the daemon's ledger,
// sometimes through the other one. Each producer owns its jobs, so producers
// never race each other for a job; dedupe keys and plugin streams are shared.
type producer struct {
	rng           *rand.Rand
	daemon, other *ledger.Ledger
	p             *projections.Projector
	name          string
	now           time.Time
	viaOther      int

	queued  []string
	running []commands.Started
}

func (pr *producer) pick() *ledger.Ledger {
	if pr.rng.IntN(4) == 0 {
		pr.viaOther++
		return pr.other
	}
	return pr.daemon
}

func (pr *producer) run(ctx context.Context, steps int) error {
	for step := range steps {
		pr.now = pr.now.Add(time.Duration(pr.rng.IntN(2000)) * time.Millisecond)
		if err := pr.step(ctx); err != nil {
			return fmt.Errorf("%s, step %d: %w", pr.name, step, err)
		}
		// The daemon's own appends are projected by the time they return:
		// the checkpoint moves before the head does, in every commit.
		if head, cp := pr.daemon.Head(), pr.p.Checkpoint(); cp < head {
			return fmt.Errorf("%s, step %d: the projector's checkpoint %d is behind this process's head %d: an append was not projected inline", pr.name, step, cp, head)
		}
	}
	return nil
}

func (pr *producer) step(ctx context.Context) error {
	switch r := pr.rng.IntN(100); {
	case r < 30 || len(pr.queued)+len(pr.running) == 0:
		res, err := commands.EnqueueJob(ctx, pr.pick(), pr.enqueue())
		if err != nil {
			return err
		}
		if !res.Deduped {
			pr.queued = append(pr.queued, res.JobID)
		}
	case r < 55 && len(pr.queued) > 0:
		return pr.start(ctx, pr.pick(), take(pr.rng, &pr.queued))
	case r < 88 && len(pr.running) > 0:
		return pr.complete(ctx, take(pr.rng, &pr.running))
	case r < 92 && len(pr.running) > 0:
		st := take(pr.rng, &pr.running)
		res, err := commands.RecoverJob(ctx, pr.pick(), commands.Recover{JobID: st.JobID, Now: pr.now})
		if err != nil {
			return err
		}
		if res.Status == events.StatusQueued {
			pr.queued = append(pr.queued, st.JobID)
		}
	default:
		if len(pr.running) > 0 && (len(pr.queued) == 0 || pr.rng.IntN(2) == 0) {
			// A running job gets a cancel request; it stays ours to complete.
			st := pr.running[pr.rng.IntN(len(pr.running))]
			_, err := commands.CancelJob(ctx, pr.pick(), commands.Cancel{JobID: st.JobID, Reason: "operator: " + pr.word(), Now: pr.now})
			return err
		}
		if len(pr.queued) > 0 {
			_, err := commands.CancelJob(ctx, pr.pick(), commands.Cancel{JobID: take(pr.rng, &pr.queued), Now: pr.now})
			return err
		}
	}
	return nil
}

func (pr *producer) start(ctx context.Context, l *ledger.Ledger, id string) error {
	st, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, PID: 4242, Now: pr.now.Add(48 * time.Hour)})
	if err != nil {
		return err
	}
	pr.running = append(pr.running, st)
	return nil
}

// complete records an attempt's outcome. Half the time it submits the next
// queued job's start with it, as a worker handing its slot over does, so
// one transaction holds both.
func (pr *producer) complete(ctx context.Context, st commands.Started) error {
	l := pr.daemon
	if pr.rng.IntN(6) == 0 {
		l = pr.pick() // a plugin run without a daemon completes its own job
	}
	out := commands.Outcome{
		Kind: events.OutcomeOK, Duration: time.Duration(pr.rng.IntN(900)) * time.Millisecond,
		Stderr: pr.stderr(), StderrTruncated: pr.rng.IntN(8) == 0,
	}
	cmd := commands.Complete{JobID: st.JobID, Attempt: st.Attempt, Now: pr.now}
	switch pr.rng.IntN(8) {
	case 0:
		out.Kind, out.Retryable, out.Error, out.ExitCode = events.OutcomeError, pr.rng.IntN(4) > 0, "boom: "+pr.word(), 1+pr.rng.IntN(100)
	case 1:
		out.Kind, out.Retryable, out.Error, out.ExitCode = events.OutcomeTimeout, true, "timed out after 1m", -1
	case 2:
		out.Kind, out.Retryable, out.Error, out.Stdout = events.OutcomeProtocolError, true, "the plugin's output is not a response", "not json "+pr.word()
	case 3:
		out.Kind, out.Error = events.OutcomeInterrupted, "interrupted: the daemon stopped"
	case 4:
		out.Kind, out.Error = events.OutcomeCanceled, "canceled by request"
	default:
		updates := pr.object()
		out.Response = json.RawMessage(fmt.Sprintf(`{"status":"ok","result":%q,"state_updates":%s}`, pr.word(), updates))
		out.StateUpdates = updates
		if pr.rng.IntN(3) == 0 {
			cmd.Facts = []commands.FactRule{{FactType: "snapshot", View: "mirror_object"}}
		}
		for range pr.rng.IntN(3) {
			cmd.Children = append(cmd.Children, pr.enqueue())
		}
	}
	cmd.Outcome = out
	// As a daemon's worker does, the next job's start is recorded at the
	// same moment as this outcome, so the two often share a commit.
	var next chan struct{}
	var nextID string
	var nst commands.Started
	var nextErr error
	if l == pr.daemon && len(pr.queued) > 0 && pr.rng.IntN(2) == 0 {
		nextID = take(pr.rng, &pr.queued)
		next = make(chan struct{})
		go func() {
			defer close(next)
			nst, nextErr = commands.StartJob(ctx, l, commands.Start{JobID: nextID, Timeout: time.Minute, PID: 4242, Now: pr.now.Add(48 * time.Hour)})
		}()
	}
	res, err := commands.CompleteJob(ctx, l, cmd)
	if next != nil {
		<-next
	}
	if err != nil {
		return err
	}
	if res.Status == events.StatusQueued {
		pr.queued = append(pr.queued, st.JobID)
	}
	for _, c := range res.Children {
		if !c.Deduped {
			pr.queued = append(pr.queued, c.JobID)
		}
	}
	if next != nil {
		if nextErr != nil {
			return fmt.Errorf("start %s: %w", nextID, nextErr)
		}
		pr.running = append(pr.running, nst)
	}
	return nil
}

func (pr *producer) enqueue() commands.Enqueue {
	plugins := []string{"echo", "fetch", "notify"}
	cmd := commands.Enqueue{
		Plugin: plugins[pr.rng.IntN(len(plugins))], Command: []string{"poll", "handle"}[pr.rng.IntN(2)],
		SubmittedBy: events.ActorCLI, MaxAttempts: 1 + pr.rng.IntN(3),
		BackoffBase: time.Second, DefaultDedupeTTL: time.Hour, Now: pr.now,
	}
	if pr.rng.IntN(5) > 0 {
		cmd.Payload = pr.object()
	}
	if pr.rng.IntN(5) == 0 {
		cmd.DedupeKey = fmt.Sprintf("key-%d", pr.rng.IntN(20))
		if pr.rng.IntN(2) == 0 {
			cmd.DedupeTTL = time.Minute
		}
	}
	return cmd
}

func (pr *producer) word() string {
	words := []string{"alpha", "βeta", "gamma 🚀", `quote"d`, "back\\slash", "new\nline", "tab\there", "<html>&amp;", ""}
	return words[pr.rng.IntN(len(words))]
}

func (pr *producer) stderr() string {
	var b strings.Builder
	for i := range pr.rng.IntN(4) {
		fmt.Fprintf(&b, "line %d: %s\n", i, pr.word())
	}
	return b.String()
}

func (pr *producer) object() json.RawMessage {
	b, err := json.Marshal(map[string]any{
		fmt.Sprintf("k%d", pr.rng.IntN(5)): pr.rng.Int64N(1 << 40),
		"price":                            json.Number(fmt.Sprintf("%d.50", pr.rng.IntN(100))),
		"word":                             pr.word(),
		"nested":                           map[string]any{"ok": pr.rng.IntN(2) == 0, "list": []int{pr.rng.IntN(9)}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// take removes and returns a random element of list.
func take[T any](rng *rand.Rand, list *[]T) T {
	i := rng.IntN(len(*list))
	v := (*list)[i]
	(*list)[i] = (*list)[len(*list)-1]
	*list = (*list)[:len(*list)-1]
	return v
}

// firstDifference returns the first line (1-based) where two dumps differ,
// and that line of each; 0 if they are identical.
func firstDifference(a, b []byte) (line int, fromA, fromB string) {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return i + 1, x, y
		}
	}
	return 0, "", ""
}

// warningLog keeps the messages of records at WARN and above.
type warningLog struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningLog) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}
func (w *warningLog) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
	return nil
}
func (w *warningLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warningLog) WithGroup(string) slog.Handler      { return w }

func (w *warningLog) messages() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}
