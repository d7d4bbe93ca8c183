package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

// world is an Engine on a real ledger in a temp dir, with plugins src
// (poll, whose state_updates are a fact; handle) and sink (handle), a route
// from src's thing.happened to sink, and a pipeline src → sink.
type world struct {
	t      testing.TB
	ctx    context.Context
	dir    string
	l      *ledger.Ledger
	engine *engine.Engine
	worker events.Worker
}

const worldConfig = `plugin_roots: ["%s"]
plugins:
  src: {retry: {max_attempts: 2, backoff_base: 1s}, circuit_breaker: {enabled: true, threshold: 1, reset_after: 1h}}
  sink: {retry: {max_attempts: 1}}
routes:
  - {from: src, event_type: thing.happened, to: sink, command: handle}
pipelines:
  - name: relay
    steps: [{uses: src}, {uses: sink}]
`

func newWorld(t testing.TB, opts ledger.Options) *world {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	root := filepath.Join(dir, "plugins")
	writePlugin(t, root, "src", "commands: [{name: poll, type: read}, {name: handle, type: write}]\n"+
		"fact_outputs:\n  - when: {command: poll}\n    from: state_updates\n    fact_type: src.snapshot\n    compatibility_view: mirror_object\n")
	writePlugin(t, root, "sink", "commands: [{name: handle, type: write}]\n")
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, worldConfig, root), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	reg, errs := pluginhost.Discover(cfg.PluginRoots, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	set, err := pipeline.Compile(cfg, func(plugin, command string) error {
		if p, ok := reg.Get(plugin); !ok {
			return fmt.Errorf("no plugin %q", plugin)
		} else if _, ok := p.Command(command); !ok {
			return fmt.Errorf("plugin %q has no command %q", plugin, command)
		}
		return nil
	})
	require.NoError(t, err)
	if opts.Synchronous == "" {
		opts.Synchronous = "NORMAL"
	}
	l, err := ledger.Open(ctx, filepath.Join(dir, "ductile.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return &world{t: t, ctx: ctx, dir: dir, l: l, worker: events.Worker{Name: "box/local", PID: 4100},
		engine: engine.New(engine.Options{Ledger: l, Config: cfg, Plugins: reg, Pipelines: set})}
}

func writePlugin(t testing.TB, root, name, commands string) {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + name + "\nversion: 1.0.0\nprotocol: 2\nentrypoint: run.sh\n" + commands
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\nexit 1\n"), 0o755))
}

// enqueue enqueues a job of plugin's command by by, as the config says.
func (w *world) enqueue(plugin, command string, by events.Actor) string {
	w.t.Helper()
	res, err := commands.EnqueueJob(w.ctx, w.l, commands.JobFor(w.engine.Config(), plugin, command, by))
	require.NoError(w.t, err)
	return res.JobID
}

// start starts job id's attempt due at now, as w's worker.
func (w *world) start(id string, now time.Time) commands.Started {
	w.t.Helper()
	st, err := commands.StartJob(w.ctx, w.l, commands.Start{JobID: id, Timeout: time.Minute, PID: os.Getpid(), Worker: &w.worker, Now: now})
	require.NoError(w.t, err)
	return st
}

// events are job id's events, oldest first.
func (w *world) events(stream string) []ledger.Event {
	w.t.Helper()
	evs, err := w.l.ReadStream(w.ctx, stream)
	require.NoError(w.t, err)
	return evs
}

func (w *world) types(stream string) []string {
	var out []string
	for _, ev := range w.events(stream) {
		out = append(out, ev.Type)
	}
	return out
}

// job is job id as its stream folds.
func (w *world) job(id string) *commands.Job {
	w.t.Helper()
	j, err := commands.FoldJob(w.events(events.JobStream(id)))
	require.NoError(w.t, err)
	return j
}

// ok is a success of job's attempt that responded response.
func (w *world) ok(st commands.Started, response string) engine.Attempt {
	return engine.Attempt{JobID: st.JobID, Attempt: st.Attempt, Worker: w.worker, Kind: events.OutcomeOK,
		Duration: 20 * time.Millisecond, Response: json.RawMessage(response), Stderr: "a line\n"}
}

const emitting = `{"status":"ok","events":[{"type":"thing.happened","payload":{"n":1}},{"type":"unrouted"}],"state_updates":{"n":1}}`

// Given a started job of src poll, when its worker reports a success that
// emitted a routed event and state updates, then the job succeeded, the
// update is recorded as the manifest's fact, and the event made a job of
// sink: whether the attempt came as plain data (decoded and read by the
// Engine, as from another machine, here through JSON) or with what a local
// worker holds.
func TestCompleteSuccessRecordsFactsAndRoutes(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			w := newWorld(t, ledger.Options{})
			id := w.enqueue("src", "poll", events.ActorCLI)
			st := w.start(id, time.Now())
			a := w.ok(st, emitting)
			if local {
				r, err := pluginhost.ParseResponse(a.Response)
				require.NoError(t, err)
				a.Local = &engine.Local{Job: st.Job, Response: r}
			} else {
				b, err := json.Marshal(a)
				require.NoError(t, err)
				a = engine.Attempt{}
				require.NoError(t, json.Unmarshal(b, &a))
			}

			done, err := w.engine.Complete(w.ctx, a)
			require.NoError(t, err)
			require.Equal(t, events.StatusSucceeded, done.Status)
			require.Equal(t, []string{"unrouted"}, done.Unrouted)
			require.Len(t, done.Enqueued, 1)
			child := done.Enqueued[0]
			require.Equal(t, "sink", child.Plugin)
			require.Equal(t, "handle", child.Command)
			require.Equal(t, 1, child.Depth)
			require.Equal(t, events.StatusQueued, w.job(done.Children[0].JobID).Status)
			require.Equal(t, []string{events.PluginFactRecorded}, w.types(events.PluginStream("src")),
				"the manifest's fact_outputs record the state updates as a fact")

			var ended events.AttemptEnded
			evs := w.events(events.JobStream(id))
			require.Equal(t, events.JobSucceeded, evs[2].Type)
			require.NoError(t, json.Unmarshal(evs[2].Data, &ended))
			require.JSONEq(t, emitting, string(ended.Response))
			require.Equal(t, "a line\n", ended.Stderr)
			require.Equal(t, int64(20), ended.DurationMS)
			require.Equal(t, &w.worker, ended.Worker, "who ran the attempt")
		})
	}
}

// The worker is recorded on job.started, as who runs the attempt.
func TestStartRecordsTheWorker(t *testing.T) {
	w := newWorld(t, ledger.Options{})
	id := w.enqueue("src", "poll", events.ActorCLI)
	w.start(id, time.Now())
	var started events.Started
	require.NoError(t, json.Unmarshal(w.events(events.JobStream(id))[1].Data, &started))
	require.Equal(t, &w.worker, started.Worker)
	require.Equal(t, os.Getpid(), started.PID)
}

// Given a src job of two attempts, when its first fails retryably, then it
// is queued for a retry after the backoff; when the second fails, it is
// dead.
func TestCompleteFailureIsRetriedThenDead(t *testing.T) {
	w := newWorld(t, ledger.Options{})
	id := w.enqueue("src", "handle", events.ActorCLI)
	now := time.Now()
	st := w.start(id, now)
	fail := engine.Attempt{JobID: id, Attempt: st.Attempt, Worker: w.worker, Kind: events.OutcomeError, Retryable: true,
		Error: "exit 1", ExitCode: 1, Stderr: "boom\n", EndedAt: now}
	done, err := w.engine.Complete(w.ctx, fail)
	require.NoError(t, err)
	require.Equal(t, events.StatusQueued, done.Status)
	require.GreaterOrEqual(t, done.NextRetryAt.Sub(now), time.Second, "the config's backoff_base")
	require.Equal(t, 2, w.job(id).Attempt)

	st = w.start(id, done.NextRetryAt)
	fail.Attempt, fail.EndedAt = st.Attempt, done.NextRetryAt
	done, err = w.engine.Complete(w.ctx, fail)
	require.NoError(t, err)
	require.Equal(t, events.StatusDead, done.Status)
	require.Equal(t, []string{events.JobEnqueued, events.JobStarted, events.JobFailed, events.JobRetryScheduled,
		events.JobStarted, events.JobFailed, events.JobDead}, w.types(events.JobStream(id)))

	// The same attempt again: the job has moved on, and nothing is appended.
	_, err = w.engine.Complete(w.ctx, fail)
	require.ErrorIs(t, err, commands.ErrInvalidTransition)
	require.Len(t, w.events(events.JobStream(id)), 7)
}

// A replay is one step: what it emits is recorded, not routed.
func TestCompleteOfAReplayRoutesNothing(t *testing.T) {
	w := newWorld(t, ledger.Options{})
	id := w.enqueue("src", "poll", events.ActorCLI)
	st := w.start(id, time.Now())
	_, err := w.engine.Complete(w.ctx, w.ok(st, `{"status":"ok"}`))
	require.NoError(t, err)
	replay, err := commands.ReplayJob(w.ctx, w.l, commands.Replay{JobID: id, MaxAttempts: 1, Now: time.Now()})
	require.NoError(t, err)

	st = w.start(replay.JobID, time.Now())
	require.Equal(t, id, st.ReplayOf)
	done, err := w.engine.Complete(w.ctx, w.ok(st, emitting))
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, done.Status)
	require.Empty(t, done.Enqueued, "a replay routes nothing")
	require.Empty(t, done.Unrouted)
}

// An outcome the ledger refuses for what it holds (here a response nested
// deeper than its JSON check allows) is recorded once more as the attempt
// failed without the plugin's output, which ends the job.
func TestCompleteRefusedOutcomeIsRecordedWithoutTheOutput(t *testing.T) {
	w := newWorld(t, ledger.Options{})
	id := w.enqueue("src", "handle", events.ActorCLI)
	st := w.start(id, time.Now())
	deep := strings.Repeat("[", events.MaxJSONDepth+1) + strings.Repeat("]", events.MaxJSONDepth+1)
	a := w.ok(st, `{"status":"ok","result":"x","junk":`+deep+`}`)
	a.Local = &engine.Local{Job: st.Job, Response: &pluginhost.Response{Status: "ok", Result: "x"}}

	done, err := w.engine.Complete(w.ctx, a)
	require.NoError(t, err)
	require.Equal(t, events.StatusDead, done.Status)
	require.Equal(t, events.OutcomeRefused, done.Outcome.Kind)
	require.Nil(t, done.Outcome.Response, "the refused output is not kept")
	require.Contains(t, done.Error, "the ledger refused to record the attempt's outcome (ok)")
	require.Equal(t, []string{events.JobEnqueued, events.JobStarted, events.JobFailed, events.JobDead}, w.types(events.JobStream(id)))
	var ended events.AttemptEnded
	require.NoError(t, json.Unmarshal(w.events(events.JobStream(id))[2].Data, &ended))
	require.Equal(t, &w.worker, ended.Worker, "the refused outcome keeps who ran the attempt")
}

// An outcome the ledger cannot take for now (another connection holds the
// write lock) is tried again until it lands, or until the caller's context
// ends: then nothing is recorded, and the job is left running for recovery.
func TestCompleteRetriesWhileTheLedgerIsBusy(t *testing.T) {
	w := newWorld(t, ledger.Options{BusyTimeout: 20 * time.Millisecond})
	id := w.enqueue("src", "handle", events.ActorCLI)
	st := w.start(id, time.Now())
	blocker, err := sqlite.OpenConn(filepath.Join(w.dir, "ductile.db"), sqlite.OpenReadWrite|sqlite.OpenWAL)
	require.NoError(t, err)
	defer blocker.Close()
	require.NoError(t, sqlitex.ExecuteTransient(blocker, "BEGIN IMMEDIATE;", nil))

	ctx, cancel := context.WithTimeout(w.ctx, 300*time.Millisecond)
	defer cancel()
	_, err = w.engine.Complete(ctx, w.ok(st, `{"status":"ok"}`))
	require.Error(t, err, "given up when ctx ended")
	require.False(t, errors.Is(err, commands.ErrInvalidTransition))

	// The lock is freed only once the completion has met it and said it
	// will try again, so what lands is the retry.
	retrying := make(chan struct{}, 1)
	a := w.ok(st, `{"status":"ok"}`)
	a.Local = &engine.Local{Log: slog.New(onMessage{"will try again", retrying})}
	landed := make(chan error, 1)
	go func() {
		_, err := w.engine.Complete(w.ctx, a)
		landed <- err
	}()
	select {
	case <-retrying:
	case err := <-landed:
		t.Fatalf("the completion ended (%v) without meeting the lock", err)
	}
	require.NoError(t, sqlitex.ExecuteTransient(blocker, "COMMIT;", nil))
	require.NoError(t, <-landed)
	require.Equal(t, events.StatusSucceeded, w.job(id).Status)
}

// A scheduled job that ends dead counts against its plugin's circuit
// breaker, with the completing Engine's settings (threshold 1: it opens).
func TestCompleteTripsTheBreaker(t *testing.T) {
	w := newWorld(t, ledger.Options{})
	enq := commands.JobFor(w.engine.Config(), "src", "poll", events.ActorScheduler)
	enq.MaxAttempts = 1
	res, err := commands.EnqueueJob(w.ctx, w.l, enq)
	require.NoError(t, err)
	st := w.start(res.JobID, time.Now())
	done, err := w.engine.Complete(w.ctx, engine.Attempt{JobID: st.JobID, Attempt: st.Attempt, Worker: w.worker,
		Kind: events.OutcomeTimeout, Retryable: true, Error: "timed out after 1m0s", ExitCode: -1})
	require.NoError(t, err)
	require.Equal(t, events.StatusDead, done.Status)
	require.Contains(t, w.types(events.BreakerStream("src", "poll")), events.BreakerOpened)
}

// A pipeline step's success moves its run on: the next step's job is
// enqueued by the same completion.
func TestCompleteOfAPipelineStepEnqueuesTheNextStep(t *testing.T) {
	w := newWorld(t, ledger.Options{})
	run, err := commands.StartPipeline(w.ctx, w.l, commands.StartRun{Pipeline: w.engine.Pipelines().Pipelines["relay"],
		Trigger: events.TriggerAPI, Payload: json.RawMessage(`{}`), SubmittedBy: "api", Config: w.engine.Config(), Now: time.Now()})
	require.NoError(t, err)
	st := w.start(run.JobID, time.Now())
	require.NotNil(t, st.Pipeline)

	done, err := w.engine.Complete(w.ctx, w.ok(st, `{"status":"ok","result":"step one"}`))
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, done.Status)
	evs := w.events(events.RunStream(run.RunID))
	last := evs[len(evs)-1]
	require.Equal(t, events.PipelineStepEnded, last.Type)
	var ended events.StepEndedData
	require.NoError(t, json.Unmarshal(last.Data, &ended))
	require.Len(t, ended.Enqueued, 1)
	next := w.job(ended.Enqueued[0].JobID)
	require.Equal(t, "sink", next.Plugin)
	require.Equal(t, events.StatusQueued, next.Status)
}

// A job completed after a reload: its facts follow the manifest it started
// with (Local.StartedWith), its routes the completing Engine's config (here
// with no routes and no plugins: the event goes unrouted).
func TestCompleteAfterAReloadRoutesWithTheNewConfig(t *testing.T) {
	w := newWorld(t, ledger.Options{})
	id := w.enqueue("src", "poll", events.ActorCLI)
	st := w.start(id, time.Now())
	reloaded := engine.New(engine.Options{Ledger: w.l, Config: config.Default(), Plugins: &pluginhost.Registry{}})
	a := w.ok(st, emitting)
	r, err := pluginhost.ParseResponse(a.Response)
	require.NoError(t, err)
	a.Local = &engine.Local{Job: st.Job, Response: r, StartedWith: w.engine}

	done, err := reloaded.Complete(w.ctx, a)
	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, done.Status)
	require.Empty(t, done.Enqueued)
	require.Equal(t, []string{"thing.happened", "unrouted"}, done.Unrouted)
	require.Equal(t, []string{events.PluginFactRecorded}, w.types(events.PluginStream("src")))
}

// BenchmarkComplete is a job's start and completion through the Engine
// (with what a local worker holds), beside the same through the
// completion command alone: the cost of the intent around the command.
func BenchmarkComplete(b *testing.B) {
	for _, through := range []string{"engine", "command"} {
		b.Run(through, func(b *testing.B) {
			w := newWorld(b, ledger.Options{})
			response := json.RawMessage(`{"status":"ok","result":"done","state_updates":{"n":1}}`)
			parsed, err := pluginhost.ParseResponse(response)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res, err := commands.EnqueueJob(w.ctx, w.l, commands.JobFor(w.engine.Config(), "src", "handle", events.ActorCLI))
				if err != nil {
					b.Fatal(err)
				}
				st, err := commands.StartJob(w.ctx, w.l, commands.Start{JobID: res.JobID, Timeout: time.Minute, Worker: &w.worker, Now: time.Now()})
				if err != nil {
					b.Fatal(err)
				}
				if through == "engine" {
					a := w.ok(st, string(response))
					a.Local = &engine.Local{Job: st.Job, Response: parsed, StartedWith: w.engine, Log: slog.New(slog.DiscardHandler)}
					_, err = w.engine.Complete(w.ctx, a)
				} else {
					_, err = commands.CompleteJob(w.ctx, w.l, commands.Complete{JobID: st.JobID, Attempt: st.Attempt, Now: time.Now(),
						Outcome:   commands.Outcome{Kind: events.OutcomeOK, Response: response, StateUpdates: parsed.StateUpdates, Duration: 20 * time.Millisecond},
						Pipelines: w.engine.PipelineRuntime(), Breaker: w.engine.Config().Plugin("src").CircuitBreaker})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// onMessage is a slog handler that signals once a record whose message
// holds substr is logged.
type onMessage struct {
	substr string
	seen   chan struct{}
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h onMessage) WithGroup(string) slog.Handler            { return h }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		select {
		case h.seen <- struct{}{}:
		default:
		}
	}
	return nil
}
