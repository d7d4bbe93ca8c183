package events

import (
	"encoding/json"
	"time"
)

// Schedule event types, on the stream schedule/<plugin>/<id>
// (schedule.Schedule.Stream).
const (
	// ScheduleFired records a firing that enqueued its job, appended with
	// the job's job.enqueued.
	ScheduleFired = "schedule.fired"
	// ScheduleSkipped records firings that enqueued nothing: missed ones
	// catch_up does not run, or one that if_running, the poll guard or a
	// circuit breaker held back.
	ScheduleSkipped = "schedule.skipped"
)

// ScheduleFiredData is the data of schedule.fired.
type ScheduleFiredData struct {
	Plugin string `json:"plugin"`
	ID     string `json:"id"`
	// Slot is the firing: its nominal and due times (and, for after:, the
	// service start it counted from). The scheduler plans from the Slot of
	// the stream's newest event.
	Slot    Slot   `json:"slot"`
	JobID   string `json:"job_id"`
	Command string `json:"command"`
	// Action is fire, queue or cancel (schedule.Action).
	Action string `json:"action"`
	Reason string `json:"reason"`
	// Canceled are the entry's jobs whose cancel this firing requested
	// (if_running: cancel).
	Canceled []string `json:"canceled,omitempty"`
	// Open are the entry's jobs queued or running once this event is in,
	// this firing's job included: the next firing checks only these.
	Open []string `json:"open"`
}

// ScheduleSkippedData is the data of schedule.skipped: Count firings from
// First to Slot (the last of them), none of which enqueued a job.
type ScheduleSkippedData struct {
	Plugin string `json:"plugin"`
	ID     string `json:"id"`
	Slot   Slot   `json:"slot"`
	First  Slot   `json:"first"`
	Count  int    `json:"count"`
	// AtLeast says Count is a lower bound (a long gap is not counted to
	// its end).
	AtLeast bool   `json:"at_least,omitempty"`
	Reason  string `json:"reason"`
	// Open are the entry's jobs queued or running, as for schedule.fired.
	Open []string `json:"open"`
}

// Slot is one firing of a schedule entry as recorded (schedule.Slot, which
// converts to and from it): its nominal and due times and, for after:, the
// service start it counted from.
type Slot struct {
	Nominal time.Time `json:"nominal"`
	Due     time.Time `json:"due"`
	Start   time.Time `json:"start,omitzero"` // zero but for after:
}

// ScheduleSlot decodes the Slot of a schedule.fired or schedule.skipped
// event's data: what Schedule.Plan takes as last.
func ScheduleSlot(data []byte) (Slot, error) {
	var d struct {
		Slot Slot `json:"slot"`
	}
	err := json.Unmarshal(data, &d)
	return d.Slot, err
}
