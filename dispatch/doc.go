// Package dispatch runs queued jobs: a bounded pool of workers, each running
// one plugin process at a time.
//
// The dispatcher is one goroutine that sleeps until something can change
// what it may start: the projector moved (new jobs, finished jobs), a worker
// freed up, or the earliest retry came due (a timer, not a ticker). When it
// wakes it reads the queue from the job_queue projection, oldest first by
// seq, and hands each eligible job to a worker, skipping jobs whose plugin is
// at its parallelism cap (smart dequeue) and jobs whose dedupe key is being
// run for the same plugin and command.
//
// A worker starts its job with a versioned append (commands.StartJob), so a
// job is never started twice even if the projection lags; runs the plugin;
// and reports the attempt to the Engine it runs with (engine.Engine.Complete),
// which records the outcome, facts or state, and every routed child job in
// one append. Workers start and complete concurrently, so
// their appends share group commits. What a plugin writes on its control
// channel while it runs (progress, export items: pluginhost.ControlMessage)
// goes to its attempt's engine.RunReport (control.go): progress at once,
// export items through a bounded queue that one goroutine records in
// order, all of it durable before the outcome. A cancel of a running job
// ends its plugin's context: the runner sends SIGTERM to its process group,
// then SIGKILL after the grace period, and the attempt ends canceled however
// the plugin exits. RunJob runs one job the same way,
// without the loop (plugin run without a daemon).
//
// The projection lags the ledger by a few milliseconds, so the dispatcher
// remembers the jobs it has running, and those it finished until the
// projector has caught up with their completion: in-memory bookkeeping for
// its own workers only; the ledger decides. docs/architecture.md ("The
// dispatcher") has the reasoning.
package dispatch
