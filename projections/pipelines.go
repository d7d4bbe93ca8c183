package projections

import (
	"bytes"
	"encoding/json"
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
	if ev.Type != events.JobEnqueued {
		return nil
	}
	d, err := pipelineJob(ev.Data)
	if err != nil || d == nil {
		return err // nil: not a pipeline job
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

// enqueuedStep is what event_context reads of job.enqueued.
type enqueuedStep struct {
	JobID       string               `json:"job_id"`
	ParentJobID string               `json:"parent_job_id"`
	Pipeline    *events.PipelineStep `json:"pipeline"`
	Context     json.RawMessage      `json:"context"`
}

// pipelineJob is what event_context reads of job.enqueued's data, nil if
// the job is no pipeline step. A job whose data does not hold the text
// "pipeline":{ is none, at the cost of one scan; one that holds it (a
// pipeline step, or a payload that says so) has its top-level fields
// walked and only the pipeline position decoded.
func pipelineJob(data []byte) (*enqueuedStep, error) {
	if !bytes.Contains(data, []byte(`"pipeline":{`)) {
		return nil, nil
	}
	var d enqueuedStep
	var step []byte
	fast := objectFields(data, func(key, val []byte) bool {
		switch string(key) {
		case "job_id":
			return plainString(val, &d.JobID)
		case "parent_job_id":
			return plainString(val, &d.ParentJobID)
		case "context":
			return raw(val, &d.Context)
		case "pipeline":
			step = val
		}
		return true
	})
	if !fast {
		d = enqueuedStep{}
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, err
		}
		if d.Pipeline == nil {
			return nil, nil
		}
		return &d, nil
	}
	if len(step) == 0 || step[0] != '{' {
		return nil, nil // the text was in the payload or the event
	}
	d.Pipeline = &events.PipelineStep{}
	if err := json.Unmarshal(step, d.Pipeline); err != nil {
		return nil, err
	}
	return &d, nil
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
			RunID: d.RunID, Pipeline: d.Pipeline, Hash: d.Hash, JobID: strPtr(d.JobID), Trigger: string(d.Trigger),
			StartedSeq: ev.Seq, StartedAt: ev.RecordedAtText(),
		})
	case events.PipelineRunFinished:
		var d events.RunFinishedData
		if err := decodeData(ev.Data, &d); err != nil {
			return err
		}
		at, seq := ev.RecordedAtText(), ev.Seq
		return queries.FinishPipelineRun(conn, queries.FinishPipelineRunParams{
			RunID: d.RunID, Status: string(d.Status), Error: strPtr(d.Error), FinishedSeq: &seq, FinishedAt: &at,
		})
	}
	return nil
}

func (PipelineRuns) Reset(conn *sqlite.Conn) error { return queries.DeletePipelineRuns(conn) }

func (PipelineRuns) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpPipelineRuns(conn, func(r queries.DumpPipelineRunsRow) error { return dumpRow(w, r) })
}
