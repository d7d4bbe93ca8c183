package views

import (
	"encoding/json"
	"fmt"

	"github.com/ductile/ductile/ledger"
)

// Event is an event of the ledger, with its data and meta as JSON and its
// hash in hex.
type Event struct {
	Seq        int64           `json:"seq"`
	Stream     string          `json:"stream"`
	Version    int64           `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	Meta       json.RawMessage `json:"meta"`
	RecordedAt string          `json:"recorded_at"` // ledger.TimeFormat, UTC
	Hash       string          `json:"hash"`
}

// EventOf is the Event shape of ev.
func EventOf(ev ledger.Event) Event {
	return Event{Seq: ev.Seq, Stream: ev.Stream, Version: ev.Version, Type: ev.Type, Data: ev.Data, Meta: ev.Meta,
		RecordedAt: ev.RecordedAt.UTC().Format(ledger.TimeFormat), Hash: fmt.Sprintf("%x", ev.Hash)}
}
