package events

import (
	"encoding/json"
	"strings"
)

// The Run protocol (spec run-protocol.md) on the ledger: a run is a job
// (run_id = job id). What a running plugin reports on its control channel
// (file descriptor 3) is recorded on the job's own stream.

// Run protocol event types.
const (
	// JobProgressed records a running attempt's progress, stage or
	// message: at most one per second per job, plus the last value when
	// the attempt ends (the lines between are coalesced into it).
	JobProgressed = "job.progressed"
	// JobExported records one export item (a user-facing output) of a
	// running attempt, durable before anyone is told of it.
	JobExported = "job.exported"
)

// IdempotencyStream is the stream of one idempotency key of POST /runs: the
// run each creation with the key made, so a repeated creation within the
// window reads one stream.
func IdempotencyStream(key string) string { return "idempotency/" + key }

// IdempotencyReserved is the type of the event that ties an idempotency key
// to the run created with it; the data is IdempotencyReservedData.
const IdempotencyReserved = "idempotency.reserved"

// IdempotencyReservedData is the data of idempotency.reserved.
type IdempotencyReservedData struct {
	JobID   string `json:"job_id"`
	Plugin  string `json:"plugin"`
	Command string `json:"command"`
}

// Progressed is the data of job.progressed. Progress is in [0, 1], nil
// when the plugin reported only a message or a stage. Lines is how many
// progress lines of the plugin this event stands for (they are coalesced).
type Progressed struct {
	Attempt  int      `json:"attempt"`
	Progress *float64 `json:"progress,omitempty"`
	Message  string   `json:"message,omitempty"`
	Stage    string   `json:"stage,omitempty"`
	Lines    int      `json:"lines,omitempty"`
}

// ExportType is the kind of an export item.
type ExportType string

// Export item types (spec §6.2).
const (
	ExportText      ExportType = "text"
	ExportURL       ExportType = "url"
	ExportBinaryURL ExportType = "binary_url"
	// ExportBinary is inline bytes, at most 64 KiB.
	ExportBinary ExportType = "binary"
)

// ExportTypes returns every export item type.
func ExportTypes() []ExportType {
	return []ExportType{ExportText, ExportURL, ExportBinaryURL, ExportBinary}
}

// Exported is the data of job.exported: one export item. Its id is the
// job id and its number among the job's items ("<job id>:<n>", n from 1),
// which orders the items of a run; created_at is the event's time.
type Exported struct {
	ExportItemID string          `json:"export_item_id"`
	Attempt      int             `json:"attempt"`
	Type         ExportType      `json:"type"`
	Text         string          `json:"text,omitempty"`
	URL          string          `json:"url,omitempty"`
	BinaryURL    string          `json:"binary_url,omitempty"`
	Binary       []byte          `json:"binary,omitempty"` // base64 in JSON
	MIME         string          `json:"mime,omitempty"`
	Description  string          `json:"description,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	TraceID      string          `json:"trace_id,omitempty"`
}

// ExportItemNumber returns n of an export item id "<job id>:<n>", or 0.
func ExportItemNumber(id string) int {
	_, n, ok := strings.Cut(id, ":")
	if !ok {
		return 0
	}
	v := 0
	for _, c := range n {
		if c < '0' || c > '9' {
			return 0
		}
		v = v*10 + int(c-'0')
	}
	return v
}
