// Package events is Ductile's event catalogue: the stream names, the event
// type names and the JSON shape of each event's data. The write side
// (package commands) appends them; the projections fold them. Both depend on
// this package and on nothing of each other.
//
// Event data carries every value a projection needs, including times that
// were decided (next_retry_at), so projections are pure functions of events.
// The catalogue is documented in docs/events.md.
package events
