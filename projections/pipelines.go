package projections

import (
	"bytes"
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// EventContext is one row per pipeline job: its run, parent, pipeline and
// step, and the whole context it was enqueued with (event_context).
type EventContext struct{}

func (EventContext) Name() string { return "event_context" }

func (EventContext) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	if ev.Type == events.LedgerArchived {
		return forgetArchived(conn, ev, queries.DeleteArchivedEventContext)
	}
	if ev.Type != events.JobEnqueued || !bytes.Contains(ev.Data, []byte(`"pipeline":{`)) {
		return nil // not a pipeline job: no need to decode it
	}
	var d events.Enqueued
	if err := decodeData(ev.Data, &d); err != nil {
		return err
	}
	if d.Pipeline == nil {
		return nil
	}
	ctx := string(d.Context)
	if ctx == "" {
		ctx = "{}"
	}
	return queries.InsertEventContext(conn, queries.InsertEventContextParams{
		JobID: d.JobID, RunID: d.Pipeline.Run, ParentID: strPtr(d.ParentJobID), PipelineName: d.Pipeline.Pipeline,
		Node: d.Pipeline.Node, AccumulatedJson: ctx, CreatedAt: ev.RecordedAtText(), Seq: ev.Seq,
	})
}

func (EventContext) Reset(conn *sqlite.Conn) error { return queries.DeleteEventContext(conn) }

func (EventContext) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpEventContext(conn, func(r queries.DumpEventContextRow) error { return dumpRow(w, r) })
}

// PipelineRuns is one row per pipeline run: its pipeline and version, its
// first job, and how and when it started and finished (pipeline_runs).
type PipelineRuns struct{}

func (PipelineRuns) Name() string { return "pipeline_runs" }

func (PipelineRuns) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	switch ev.Type {
	case events.LedgerArchived:
		return forgetArchived(conn, ev, queries.DeleteArchivedPipelineRuns)
	case events.PipelineRunStarted:
		var d events.RunStartedData
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		return queries.InsertPipelineRun(conn, queries.InsertPipelineRunParams{
			RunID: d.RunID, Pipeline: d.Pipeline, Hash: d.Hash, JobID: strPtr(d.JobID), Trigger: d.Trigger,
			StartedSeq: ev.Seq, StartedAt: ev.RecordedAtText(),
		})
	case events.PipelineRunFinished:
		var d events.RunFinishedData
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		at, seq := ev.RecordedAtText(), ev.Seq
		return queries.FinishPipelineRun(conn, queries.FinishPipelineRunParams{
			RunID: d.RunID, Status: d.Status, Error: strPtr(d.Error), FinishedSeq: &seq, FinishedAt: &at,
		})
	}
	return nil
}

func (PipelineRuns) Reset(conn *sqlite.Conn) error { return queries.DeletePipelineRuns(conn) }

func (PipelineRuns) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpPipelineRuns(conn, func(r queries.DumpPipelineRunsRow) error { return dumpRow(w, r) })
}
