// Package stream serves the ledger as live streams of Server-Sent Events:
// every event (GET /events), the runs channel (GET /runs/stream, from
// views.FollowRuns) and one run's export channel (GET
// /runs/{id}/export/stream). Each message's id is the seq of the ledger
// event it comes from, so a client that reconnects with Last-Event-ID gets
// every message after it exactly once, in seq order. Everything is read
// from the ledger, never from an in-memory hub that could drop it; the
// three share one writer (heartbeats, a deadline per write, the end at
// shutdown).
package stream
