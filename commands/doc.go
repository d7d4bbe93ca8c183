// Package commands is Ductile's write side. Each command is a decision:
// it loads the streams it needs by folding their events, checks the rules
// (the job state machine of spec §3.3, dedupe of §3.6, retry of §5.7), and
// returns the events to append. Every command runs inside the ledger's write
// transaction through ledger.Decide, so what it read is still true when its
// events land, and two commands can never both act on one state: a job is
// never started twice, and concurrent enqueues with one dedupe key never
// both get in.
//
// Commands read streams only, never projections.
package commands
