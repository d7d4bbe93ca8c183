package projections

import (
	"encoding/json"
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// PluginFacts is the append-only record of facts plugins emitted (spec
// §5.9), one row per plugin.fact_recorded event.
type PluginFacts struct{}

func (PluginFacts) Name() string { return "plugin_facts" }

func (PluginFacts) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	if ev.Type != events.PluginFactRecorded {
		return nil
	}
	var d events.FactRecorded
	if err := decodeData(ev.Data, &d); err != nil {
		return err
	}
	plugin := pluginOf(ev.Stream)
	return queries.InsertFact(conn, queries.InsertFactParams{
		Seq: ev.Seq, PluginName: plugin, FactType: d.FactType, JobID: strPtr(d.JobID), Command: strPtr(d.Command),
		FactJson: string(d.Fact), CreatedAt: ev.RecordedAtText(),
	})
}

func (PluginFacts) Reset(conn *sqlite.Conn) error { return queries.DeleteFacts(conn) }

func (PluginFacts) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpFacts(conn, func(r queries.DumpFactsRow) error { return dumpRow(w, r) })
}

// PluginState is the compatibility view: one row per plugin holding its
// latest state, mirrored from facts (mirror_object) or written through
// from state_updates merges.
type PluginState struct{}

func (PluginState) Name() string { return "plugin_state" }

func (PluginState) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	var state json.RawMessage
	switch ev.Type {
	case events.PluginFactRecorded:
		var d events.FactRecorded
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		state = d.Fact
	case events.PluginStateMerged:
		var d events.StateMerged
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		state = d.State
	default:
		return nil
	}
	at := ev.RecordedAtText()
	return queries.UpsertPluginState(conn, queries.UpsertPluginStateParams{
		PluginName: pluginOf(ev.Stream), State: string(state), UpdatedAt: &at, UpdatedSeq: ev.Seq,
	})
}

func (PluginState) Reset(conn *sqlite.Conn) error { return queries.DeletePluginState(conn) }

func (PluginState) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpPluginState(conn, func(r queries.DumpPluginStateRow) error { return dumpRow(w, r) })
}

func pluginOf(stream string) string {
	const prefix = "plugin/"
	if len(stream) > len(prefix) {
		return stream[len(prefix):]
	}
	return stream
}
