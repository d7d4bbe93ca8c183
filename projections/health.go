package projections

import (
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// PluginHealth is one row per plugin: how its newest init went (and the
// hash of the config it ran with) and what its newest health check found.
type PluginHealth struct{}

func (PluginHealth) Name() string { return "plugin_health" }

func (PluginHealth) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	switch ev.Type {
	case events.PluginInitialized, events.PluginInitFailed, events.PluginHealthChecked:
	default:
		return nil
	}
	plugin := events.PluginFromHealthStream(ev.Stream)
	at := ev.RecordedAtText()
	seq := ev.Seq
	switch ev.Type {
	case events.PluginInitialized:
		var d events.InitializedData
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		return queries.UpsertPluginInit(conn, queries.UpsertPluginInitParams{
			PluginName: plugin, InitStatus: initStatus(events.PluginInitialized), InitConfigHash: strPtr(d.ConfigHash),
			InitVersion: strPtr(d.Version), InitAt: &at, InitSeq: &seq,
		})
	case events.PluginInitFailed:
		var d events.InitFailedData
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		return queries.UpsertPluginInit(conn, queries.UpsertPluginInitParams{
			PluginName: plugin, InitStatus: initStatus(events.PluginInitFailed), InitConfigHash: strPtr(d.ConfigHash),
			InitVersion: strPtr(d.Version), InitError: &d.Error, InitAt: &at, InitSeq: &seq,
		})
	default:
		var d events.HealthCheckedData
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		status := string(d.Status)
		return queries.UpsertPluginHealthCheck(conn, queries.UpsertPluginHealthCheckParams{
			PluginName: plugin, HealthStatus: &status, HealthMessage: strPtr(d.Message), HealthAt: &at, HealthSeq: &seq,
		})
	}
}

// initStatus is the init_status column for an init event type:
// initialized or init_failed.
func initStatus(eventType string) *string {
	s := eventType[len("plugin."):]
	return &s
}

func (PluginHealth) Reset(conn *sqlite.Conn) error { return queries.DeletePluginHealth(conn) }

func (PluginHealth) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpPluginHealth(conn, func(r queries.DumpPluginHealthRow) error { return dumpRow(w, r) })
}
