// Package projections builds Ductile's read models from the ledger.
//
// A [Projection] is a pure function of events: Apply folds one event into its
// tables, Reset empties them, Dump writes them in a canonical order. The
// [Projector] is the only writer of projection tables. It tails the log from
// its checkpoint, applies a page of events to every projection and moves the
// checkpoint in the same transaction, so a crash can never leave a projection
// ahead of or behind its checkpoint. It sleeps until the ledger says
// something was committed (in this process, or in another one through the
// WAL watcher) and never polls.
//
// Rebuild truncates every projection and replays the log in one
// transaction, so readers see either the old content or the new, never an
// empty table; replaying the same log always yields byte-identical Dumps.
package projections
