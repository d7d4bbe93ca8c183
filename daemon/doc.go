// Package daemon assembles a running Ductile: it takes the single-instance
// lock on the state directory, opens the ledger, and starts and stops the
// long-running parts (projector, and in later stages dispatcher, scheduler,
// HTTP API) in order. It owns the lock, and with it the rules other
// processes follow around it: catching projections up when nobody holds it
// (CatchUpUnlessHeld), replaying them in place under it (ReplayInPlace), and
// waiting for the holder's record of what it loaded (WaitApplied).
package daemon
