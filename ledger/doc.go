// Package ledger is Ductile's event store: an append-only SQLite table of
// immutable events, each chained to the one before by a BLAKE3 hash.
//
// Every change of state in Ductile is an [Event] appended here. An event
// belongs to a stream (job/<id>, plugin/<name>, …) and carries the stream's
// next version, so [Ledger.Append] with an expected version is optimistic
// concurrency: two writers that decided from the same state cannot both get
// in ([ErrVersionConflict]). [Ledger.Decide] goes one step further and runs
// the decision itself inside the write transaction.
//
// Writes go through one writer connection owned by one goroutine, which
// group-commits: appends that arrive while a transaction is being committed
// are batched into the next one, so many callers share one fsync. Each
// caller's events are applied inside their own savepoint, so one caller's
// conflict or bad event fails that caller alone, never its neighbours.
// A caller returns only after its batch is durable (synchronous=FULL).
//
// Reads use a pool of query-only connections. [Ledger.Changed] is closed after
// every commit, by this process or (seen through the WAL file) by another.
package ledger
