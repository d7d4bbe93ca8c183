// Package views is the read side: what the CLI and the HTTP API show — jobs,
// attempts, a job's inspection and logs, the queue, events, ledger stats —
// read from the projections and the job streams, with their JSON shapes.
// Front ends only parse input and format output.
//
// Each function takes a context and the ledger and returns a shape; none
// prints, and errors are typed ([*JobNotFoundError], [*AmbiguousIDError])
// so that each front end maps them to its own codes.
package views
