package projections

import (
	"encoding/json"
	"fmt"
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

// Apply applies one event: a page of one (applyPage).
func (f PluginFacts) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return f.applyPage(conn, newPage([]ledger.Event{ev}))
}

// applyPage inserts each of the page's facts: a row of its own, so there is
// nothing to fold, but each event's data is decoded once for both plugin
// projections.
func (PluginFacts) applyPage(conn *sqlite.Conn, pg *page) error {
	for i, ev := range pg.events {
		if ev.Type != events.PluginFactRecorded {
			continue
		}
		d, err := pg.decode(i)
		if err != nil {
			return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
		}
		fr := d.(*events.FactRecorded)
		err = queries.InsertFact(conn, queries.InsertFactParams{
			Seq: ev.Seq, PluginName: pluginOf(ev.Stream), FactType: fr.FactType, JobID: strPtr(fr.JobID), Command: strPtr(fr.Command),
			FactJson: string(fr.Fact), CreatedAt: ev.RecordedAtText(),
		})
		if err != nil {
			return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	return nil
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

// Apply applies one event: a page of one (applyPage).
func (s PluginState) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	return s.applyPage(conn, newPage([]ledger.Event{ev}))
}

// applyPage writes each plugin's state once, as the page's last fact or
// merge for it left it: every upsert replaces the whole row.
func (PluginState) applyPage(conn *sqlite.Conn, pg *page) error {
	var rows pendingRows[string, queries.UpsertPluginStateParams]
	for i, ev := range pg.events {
		var state json.RawMessage
		switch ev.Type {
		case events.PluginFactRecorded, events.PluginStateMerged:
			d, err := pg.decode(i)
			if err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
			if fr, ok := d.(*events.FactRecorded); ok {
				state = fr.Fact
			} else {
				state = d.(*events.StateMerged).State
			}
		default:
			continue
		}
		at, plugin := ev.RecordedAtText(), pluginOf(ev.Stream)
		row := &queries.UpsertPluginStateParams{PluginName: plugin, State: string(state), UpdatedAt: &at, UpdatedSeq: ev.Seq}
		if _, ok := rows.byKey[plugin]; ok {
			rows.byKey[plugin] = row
			continue
		}
		rows.add(plugin, row)
	}
	return rows.flush(func(r *queries.UpsertPluginStateParams) error { return queries.UpsertPluginState(conn, *r) })
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
