// Package scheduler runs the schedules: one goroutine plans each schedule
// entry from the Slot of the newest event on its stream, records what is
// due (commands.FireScheduleJobs: schedule.fired with its job, or
// schedule.skipped) and sleeps on one timer until the earliest next due
// time, woken early by Apply or Stop. The planning itself is package
// schedule's; how the loop works is in docs/architecture.md ("The
// scheduler loop").
package scheduler
