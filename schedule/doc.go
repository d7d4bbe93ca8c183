// Package schedule plans when a plugin's schedule entries fire: the nominal
// times of an every, cron, at or after entry in its time zone (DST as cron
// does it), the time controls (not_on, only_between, preferred_window and a
// stable jitter), catch-up after missed firings, and whether a due firing
// may enqueue its job (if_running and the poll guard). Every function is a
// pure function of its inputs and the time it is given: no clock, no
// sleeping, no ledger.
//
// The scheduler loop stores each decision as an event on the stream
// schedule/<plugin>/<id> (schedule.fired, schedule.skipped) carrying the
// Slot it covers, and rebuilds its state from the newest such event. The
// rules are written up for operators in docs/config-reference.md and for
// contributors in docs/architecture.md ("Planning schedule firings").
package schedule
