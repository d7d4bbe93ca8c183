package events

// Actor is who acted: every event's meta records it (ledger.Meta.Actor), and
// a job's submitted_by and a run's submitted_by are the actor that asked for
// them. The constants are the actors the core itself names; a plugin that
// merges its state acts under its own name (Actor(plugin)).
type Actor string

// Actors.
const (
	ActorCLI        Actor = "cli"        // a ductile command run by hand
	ActorAPI        Actor = "api"        // the HTTP API
	ActorWebhook    Actor = "webhook"    // a webhook delivery
	ActorScheduler  Actor = "scheduler"  // a schedule's firing
	ActorRoute      Actor = "route"      // a route from another job's event
	ActorPipeline   Actor = "pipeline"   // a pipeline run's step
	ActorDaemon     Actor = "daemon"     // what a daemon records of itself
	ActorDispatcher Actor = "dispatcher" // the run of a job's attempt
	ActorRecovery   Actor = "recovery"   // crash recovery of a running job
	ActorWorker     Actor = "worker"     // a remote worker host, through the API
)
