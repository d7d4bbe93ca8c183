// Package ledgertest helps tests and benchmarks build large ledgers fast.
package ledgertest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// RepeatLifecycle returns the events of a recorded job lifecycle as new
// events of the job id: appended in bulk, they make another job that lived
// the same life, without running it.
func RepeatLifecycle(tb testing.TB, recorded []ledger.Event, id string) []ledger.NewEvent {
	tb.Helper()
	old := events.JobIDFromStream(recorded[0].Stream)
	out := make([]ledger.NewEvent, len(recorded))
	for i, ev := range recorded {
		var meta ledger.Meta
		if err := json.Unmarshal(bytes.ReplaceAll(ev.Meta, []byte(old), []byte(id)), &meta); err != nil {
			tb.Fatal(err)
		}
		out[i] = ledger.NewEvent{Stream: strings.ReplaceAll(ev.Stream, old, id), ExpectedVersion: ledger.AnyVersion, Type: ev.Type,
			Data: json.RawMessage(bytes.ReplaceAll(ev.Data, []byte(old), []byte(id))), Meta: meta}
		if strings.HasPrefix(ev.Stream, "job/") {
			out[i].ExpectedVersion = ev.Version - 1
		}
	}
	return out
}
