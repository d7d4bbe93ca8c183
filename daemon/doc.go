// Package daemon assembles a running Ductile. A Core (core.go) is what every
// process acting on a state directory holds: the single-instance lock, the
// ledger, the projector and the engine.Engine of the config applied, with
// the jobs a stopped process left running recovered; plugin run without a
// daemon runs its one job on a Core. A Daemon is a Core held as the daemon
// with its long-running services (services.go): dispatcher, scheduler, log
// retention, HTTP API and webhooks, started and stopped in order, and
// reloads that swap the Engine whole. The package owns the lock, and with it
// the rules other processes follow around it: catching projections up when
// nobody holds it (CatchUpUnlessHeld), replaying them in place under it
// (ReplayInPlace), and waiting for the holder's record of what it loaded
// (WaitApplied).
package daemon
