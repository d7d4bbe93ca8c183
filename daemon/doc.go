// Package daemon assembles a running Ductile: it takes the single-instance
// lock on the state directory, opens the ledger, and starts and stops the
// long-running parts (projector, and in later stages dispatcher, scheduler,
// HTTP API) in order.
package daemon
