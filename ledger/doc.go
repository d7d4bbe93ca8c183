// Package ledger is Ductile's event store: an append-only SQLite table of
// immutable events, each chained to the one before by a BLAKE3 hash.
//
// Every change of state in Ductile is an [Event] appended here. An event
// belongs to a stream (job/<id>, plugin/<name>, …) and carries the stream's
// next version, so [Ledger.Append] with an expected version is optimistic
// concurrency: two writers that decided from the same state cannot both get
// in ([ErrVersionConflict]). [Ledger.Decide] goes one step further and runs
// the decision itself inside the write transaction. The database enforces
// the versions too: UNIQUE(stream, version) and a trigger that refuses gaps.
//
// Writes go through one writer connection owned by one goroutine, which
// group-commits: appends that arrive while a transaction is being committed
// are batched into the next one. Each caller's events are applied inside
// their own savepoint, so one caller's conflict or bad event fails that
// caller alone, never its neighbours. Commits do not flush: a syncer
// goroutine fsyncs the WAL and only then answers durable callers, one flush
// for every commit before it, while the writer goes on (see sync.go).
// [Relaxed] appends are answered once committed and flushed within
// [RelaxedSyncDelay]. [Ledger.DecideEach] queues several independent
// decisions back to back, so a caller with several appends to make at once
// gets them into one transaction, each answered as [Ledger.Decide] would.
//
// A decision reads a stream's state with [Fold]: the ledger caches each
// fold by (stream, version) and extends it with the decision's own appends,
// so the next decision on the stream neither reads nor decodes it again.
//
// A projector may install an [InlineProjection], run inside each append
// transaction, so projections follow this process's appends with no second
// transaction. Reads use a pool of query-only connections. [Ledger.Changed]
// is closed after every commit, by this process or (seen through the WAL
// watcher) by another; [Ledger.External] only on the latter.
package ledger
