package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
)

// runner runs one attempt of a job: it records the start, runs the plugin
// and reports the attempt to its Engine, which records the completion. The dispatch loop's workers and RunJob both run
// jobs through it.
type runner struct {
	ledger  *ledger.Ledger
	current atomic.Pointer[engine.Engine] // what a start claimed now runs with
	worker  events.Worker                 // who runs the attempts, as recorded
	log     *slog.Logger
	grace   time.Duration
	now     func() time.Time
	pause   *startPause
	observe Observer // nil: none
	// stopped ends the retries of an outcome the ledger keeps refusing
	// (the dispatcher gives up on them at shutdown).
	stopped context.Context
}

func newRunner(opts Options, stopped context.Context) *runner {
	log := opts.Logger.With("component", "dispatcher")
	r := &runner{
		ledger: opts.Engine.Ledger(), worker: opts.Worker, log: log,
		grace: opts.Grace, now: opts.Now, pause: newStartPause(log, opts.Now), stopped: stopped,
		observe: opts.Observer,
	}
	r.current.Store(opts.Engine)
	return r
}

// startClaim is a job's start, to be recorded once its plugin's process
// has spawned (the start records its process group, for recovery to end
// it should this process die first), its answer to come. The worker that
// runs the job writes the plugin's request only once the start is
// recorded: a plugin that got its request always has its group on record.
type startClaim struct {
	cmd    commands.Start
	engine *engine.Engine // the job runs with it, whatever a reload brings
	// handed says the worker whose slot this job took records its start,
	// with that worker's own outcome (commands.HandOff); else the job's
	// own worker records it.
	handed  bool
	final   sync.Once
	ready   chan struct{} // closed once cmd is final: the plugin's process is in it, or there is none
	once    sync.Once
	done    chan struct{}
	started commands.Started
	err     error
}

// newClaim is c's start, not recorded yet; handed says by whom (startClaim).
func (r *runner) newClaim(c candidate, handed bool) *startClaim {
	e := r.current.Load()
	return &startClaim{done: make(chan struct{}), ready: make(chan struct{}), engine: e, handed: handed, cmd: commands.Start{
		JobID: c.id, Timeout: e.Config().Timeout(c.plugin, c.command), PID: os.Getpid(), Worker: &r.worker, Now: r.now(),
	}}
}

// spawned makes the start final with the process group of the job's
// plugin (nil: no process was spawned) and, unless it is handed, records
// it. The job's worker calls it once its plugin has spawned, or once it
// knows none will; later calls do nothing.
func (s *startClaim) spawned(l *ledger.Ledger, plugin *events.PluginProcess) {
	s.final.Do(func() {
		s.cmd.Plugin = plugin
		close(s.ready)
		if !s.handed {
			s.record(l)
		}
	})
}

// record records the start on its own, once it is final, unless it has
// been answered. Like every append of a run, it is not tied to the job's
// context: it must land even if the job is canceled.
func (s *startClaim) record(l *ledger.Ledger) {
	<-s.ready
	s.once.Do(func() {
		s.started, s.err = commands.StartJob(context.Background(), l, s.cmd)
		close(s.done)
	})
}

// answer gives the start's answer, recorded by someone else.
func (s *startClaim) answer(st commands.Started, err error) {
	s.once.Do(func() {
		s.started, s.err = st, err
		close(s.done)
	})
}

// wait is the start's answer; it may be waited for more than once.
func (s *startClaim) wait() (commands.Started, error) {
	<-s.done
	return s.started, s.err
}

// attempt is how one run of a job went, for the dispatcher's bookkeeping.
type attempt struct {
	startErr error // the job was not started (refused for now, or it moved on)
	settle   int64 // the seq of its recorded outcome (0: none was)
}

// run runs c's attempt, whose start is queued as start. exited, if not nil,
// is called once the plugin's process is gone and before the outcome is
// recorded: the dispatcher hands the slot on there, and returns the start
// of the job it handed it to, if any, for run to record with its outcome.
// A start the ledger refused for now pauses every start (startPause).
func (r *runner) run(ctx context.Context, c candidate, start *startClaim, exited func() *startClaim) attempt {
	log := r.log.With("job_id", c.id, "plugin", c.plugin, "command", c.command)
	timeout := start.cmd.Timeout
	var st commands.Started
	var startErr error
	started := false
	waitStart := func() error {
		st, startErr = start.wait()
		started = startErr == nil
		return startErr
	}
	var res pluginhost.Result
	var plugin *events.PluginProcess // the process group of the attempt's plugin, once spawned
	var control *attemptControl      // what its plugin reports on its control channel, once it does
	p, cfgJSON, problem := runnable(start.engine, c)
	if problem == "" {
		res = pluginhost.RunPrepared(ctx, p, c.command, func() (pluginhost.Request, error) {
			start.spawned(r.ledger, plugin)
			if err := waitStart(); err != nil {
				return pluginhost.Request{}, err
			}
			return pluginhost.Request{
				Protocol: pluginhost.ProtocolVersion, JobID: st.JobID, Command: st.Command,
				Config: cfgJSON, State: st.State, Context: requestContext(st.Job), Event: st.Event,
				DeadlineAt: r.now().Add(timeout),
			}, nil
		}, pluginhost.RunOptions{Timeout: timeout, Grace: r.grace, OnSpawn: func(proc events.PluginProcess) { plugin = &proc }, OnStderr: func(lines pluginhost.StderrLines) {
			// A plugin may write before its start is recorded (it runs from
			// the spawn on): its lines wait for the start's answer, which
			// comes, since a spawned plugin's request is always prepared.
			if st, err := start.wait(); err == nil {
				r.recordStderr(st.Job, lines)
			}
		}, RunID: c.id, TraceID: c.traceID, Control: func(m pluginhost.ControlMessage) {
			// Control lines come once the request is written: the start is
			// recorded.
			if control == nil {
				control = &attemptControl{e: start.engine, jobID: st.Job.JobID, attempt: st.Job.Attempt, log: log, stopped: r.stopped}
			}
			control.take(m)
		}})
	}
	defer func() {
		if control != nil {
			control.close(r.stopped) // should the completion panic, its goroutines still end
		}
	}()
	if !started && startErr == nil {
		// No process got a request: the plugin cannot run here (problem),
		// or its process could not be spawned (a missing interpreter, no
		// more processes…; res says so). The attempt is recorded all the
		// same, started and failed, so it is retried like any other.
		start.spawned(r.ledger, nil)
		waitStart()
	}
	if !started {
		if refusedForNow(startErr) {
			r.pause.startRefused(startErr)
		} else {
			log.Debug("job not started", "err", startErr) // canceled, or started elsewhere
		}
		return attempt{startErr: startErr}
	}
	r.pause.startRecorded()
	job := st.Job
	a := engine.Attempt{JobID: job.JobID, Attempt: job.Attempt, Worker: r.worker, Kind: events.OutcomeError, Error: problem}
	if problem == "" {
		a = r.attemptOf(ctx, job, res, log)
	}
	if r.observe != nil {
		if problem == "" && res.PID == 0 && p.Step == nil && res.Kind == events.OutcomeError {
			r.observe.SpawnFailed(c.plugin)
		}
		r.observe.AttemptEnded(c.plugin, c.command, a.Kind, a.Duration)
	}
	a.EndedAt = r.now()
	local := &engine.Local{Job: job, Response: res.Response, StartedWith: start.engine, Log: log}
	if exited != nil {
		if next := exited(); next != nil {
			defer next.record(r.ledger) // should the completion panic, the next job still gets its start
			// The start records the next job's plugin process: wait for its spawn.
			<-next.ready
			local.Next = &engine.Handoff{Start: next.cmd, Answer: next.answer}
		}
	}
	a.Local = local
	if control != nil {
		// Its export items are durable and its last progress written before
		// the outcome: the outcome's result_refs name them.
		control.close(r.stopped)
	}
	done, err := r.current.Load().Complete(r.stopped, a)
	if err != nil {
		return attempt{}
	}
	return attempt{settle: done.Seqs[len(done.Seqs)-1]}
}

// recordStderr records lines the plugin of a running job wrote to stderr
// (job.stderr_written) as they come: the runner hands them on in order, and
// every delivery is recorded before the run returns, so before the job's
// outcome. A refusal (the job has moved on) loses nothing the outcome does
// not carry.
func (r *runner) recordStderr(job *commands.Job, sl pluginhost.StderrLines) {
	lines := make([]events.StderrLine, len(sl.Lines))
	for i, l := range sl.Lines {
		lines[i] = events.StderrLine{At: commands.Time(l.At), Text: l.Text}
	}
	err := commands.RecordStderr(context.Background(), r.ledger, commands.StderrLines{
		JobID: job.JobID, Attempt: job.Attempt, Line: sl.First + 1, Lines: lines, Truncated: sl.Truncated,
	})
	if err != nil {
		r.log.Debug("stderr lines not recorded while the job ran; its outcome carries them", "job_id", job.JobID, "err", err)
	}
}

// runnable finds the job's plugin and its config in e, or says why it
// cannot run.
func runnable(e *engine.Engine, c candidate) (*pluginhost.Plugin, json.RawMessage, string) {
	if why := e.CannotRun(c.plugin, c.command); why != nil {
		return nil, nil, why.Error()
	}
	p, _ := e.Plugins().Get(c.plugin)
	cfgJSON, err := e.PluginConfig(c.plugin)
	if err != nil {
		return nil, nil, "encode plugin config: " + err.Error()
	}
	return p, cfgJSON, ""
}

// requestContext is the baggage a job's plugin receives as request.context:
// the context its pipeline step recorded, {} when none.
func requestContext(j *commands.Job) json.RawMessage {
	if j == nil || len(j.Context) == 0 || string(j.Context) == "null" {
		return json.RawMessage("{}")
	}
	return j.Context
}
