package api

import (
	"encoding/json"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/views"
)

// Run kinds: what a run id names.
const (
	RunKindPlugin   = "plugin"
	RunKindPipeline = "pipeline"
)

// RunResource is one run of the run resource: a plugin run's RunRecord or
// a pipeline run, told apart by kind. Exactly one is set.
type RunResource struct {
	Plugin   *views.RunRecord
	Pipeline *PipelineRunRecord
}

// MarshalJSON writes the run that is set.
func (r RunResource) MarshalJSON() ([]byte, error) {
	if r.Pipeline != nil {
		return json.Marshal(r.Pipeline)
	}
	return json.Marshal(r.Plugin)
}

// Schema is the OpenAPI schema: one of the two, by kind.
func (RunResource) Schema(reg huma.Registry) *huma.Schema {
	plugin := reg.Schema(reflect.TypeFor[views.RunRecord](), true, "")
	pipeline := reg.Schema(reflect.TypeFor[PipelineRunRecord](), true, "")
	return &huma.Schema{
		Description: "A run: kind plugin (a job's RunRecord) or kind pipeline (a pipeline run)",
		OneOf:       []*huma.Schema{plugin, pipeline},
		Discriminator: &huma.Discriminator{PropertyName: "kind", Mapping: map[string]string{
			RunKindPlugin: plugin.Ref, RunKindPipeline: pipeline.Ref,
		}},
	}
}

// PipelineRunRecord is a pipeline run as the run resource shows it: the
// pipeline run (views.Run) with its kind and its steps' runs.
type PipelineRunRecord struct {
	Kind string `json:"kind" enum:"pipeline" doc:"pipeline"`
	views.Run
	// ChildRunIDs are the plugin runs its steps enqueued, in order.
	ChildRunIDs []string `json:"child_run_ids,omitempty" doc:"The plugin runs (jobs) its steps enqueued, in order (GET /runs/{id} only)"`
}

// PipelineRecord is run as a PipelineRunRecord.
func PipelineRecord(run views.Run) *PipelineRunRecord {
	out := &PipelineRunRecord{Kind: RunKindPipeline, Run: run}
	for _, step := range run.Steps {
		if step.Outcome == views.StepEnqueued && step.JobID != "" {
			out.ChildRunIDs = append(out.ChildRunIDs, step.JobID)
		}
	}
	return out
}
