package commands

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
)

// StartRun asks for a run of a pipeline.
type StartRun struct {
	Pipeline *pipeline.Pipeline
	Trigger  string // api | cli | event | hook
	// Payload is what the first step receives as its event's payload
	// (event type "ductile.pipeline").
	Payload     json.RawMessage
	SubmittedBy string
	Config      *config.Config
	Now         time.Time
}

// RunStartedResult is a started run: its id and its first job.
type RunStartedResult struct {
	RunID string `json:"run_id"`
	JobID string `json:"job_id"`
	Seq   int64  `json:"seq"`
}

// StartPipeline records pipeline.run_started and enqueues the run's first
// step(s), in one durable decision. (Body filled in by the runtime change.)
func StartPipeline(ctx context.Context, l *ledger.Ledger, cmd StartRun) (RunStartedResult, error) {
	return RunStartedResult{}, errors.New("pipelines: not built yet")
}
