// Package stream serves the ledger as a live stream of Server-Sent Events
// (GET /events): each event's seq is its SSE id, so a client that
// reconnects with Last-Event-ID gets every event after it exactly once, in
// seq order. Events are read from the ledger with views.FollowEvents, never
// from an in-memory hub that could drop them.
package stream
