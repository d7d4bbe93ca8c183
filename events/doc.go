// Package events is Ductile's event catalogue: the stream names, the event
// type names and the JSON shape of each event's data. The write side
// (package commands) appends them; the projections fold them. Both depend on
// this package and on nothing of each other.
//
// Event data carries every value a projection needs, including times that
// were decided (next_retry_at), so projections are pure functions of events.
// The shapes are this package's own types, and it imports only the
// standard library: a package whose values go into an event converts them
// field by field, so that changing it never changes what is stored. Every
// event type's JSON is pinned by testdata/<type>.golden.json. The catalogue
// is documented in docs/events.md.
package events
