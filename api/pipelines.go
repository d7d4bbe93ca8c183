package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humaecho"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/views"
)

// syncRetryAfter is the Retry-After of a 503 too_many_sync, in seconds.
const syncRetryAfter = 1

// registerPipelines adds POST /pipeline/{name}.
func (s *Server) registerPipelines() {
	s.syncSlots = make(chan struct{}, s.opts.Settings.MaxConcurrentSync)
	path := "/pipeline/{name}"
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "run-pipeline", Method: http.MethodPost, Path: path,
		Summary: "Run a pipeline",
		Description: "Starts a run of the pipeline with the body as the payload of its first step's event (ductile.pipeline). " +
			"An async pipeline answers 202 once the run is durable. A synchronous one waits for the run to finish, up to the " +
			"pipeline's timeout capped by api.max_sync_timeout: 200 with its status and results when it succeeded, 424 (code run_failed) " +
			"with the same body when it failed, so that a script's curl -f fails too; or 202 with status running " +
			"past the wait (the run goes on: see its first job with GET /job/{id}/tree). At most api.max_concurrent_sync callers wait " +
			"at once: one more is answered 503 too_many_sync with Retry-After, and nothing is started. " +
			"Idempotency-Key is not supported for pipelines yet: a request with it is refused (400).",
		MaxBodyBytes: s.opts.Settings.MaxBodySize + 1, SkipValidateBody: true,
		RequestBody: &huma.RequestBody{Description: "The payload: a JSON object, or no body ({})",
			Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: huma.TypeObject}}}},
		Middlewares: huma.Middlewares{s.liftWriteDeadline},
		Errors:      []int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable},
	}, auth.PluginRW), s.handleRunPipeline)
	op := s.api.OpenAPI().Paths[path].Post
	op.RequestBody.Required = false
	delete(op.RequestBody.Content, "application/octet-stream")
	ok := op.Responses["200"]
	ok.Description = "A synchronous pipeline's run succeeded within the wait: its status and results"
	op.Responses["202"] = &huma.Response{
		Description: "The run started (an async pipeline), or a synchronous one is still running past the wait: status running",
		Content:     ok.Content,
	}
	op.Responses[strconv.Itoa(http.StatusFailedDependency)] = &huma.Response{
		Description: "A synchronous pipeline's run failed within the wait: status failed, its error and results, and code run_failed",
		Content:     ok.Content,
	}
	op.Responses["503"].Headers = map[string]*huma.Param{"Retry-After": {
		Description: "Seconds to wait before calling again", Schema: &huma.Schema{Type: huma.TypeInteger},
	}}
}

// liftWriteDeadline lets a synchronous caller's answer be written after
// api.write_timeout: its wait may last up to api.max_sync_timeout.
func (s *Server) liftWriteDeadline(ctx huma.Context, next func(huma.Context)) {
	set := s.opts.Settings
	w := humaecho.Unwrap(ctx).Response().Writer
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(set.MaxSyncTimeout + set.WriteTimeout))
	next(ctx)
}

// RunPipelineInput is POST /pipeline/{name}'s request.
type RunPipelineInput struct {
	Name           string `path:"name" maxLength:"128" doc:"A pipeline's name"`
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"256" doc:"Not supported for pipelines yet: a request with it is refused (400)"`
	RawBody        []byte
}

// PipelineRun is the answer to a pipeline run: when a synchronous run
// finished within the wait, 200 if it succeeded and 424 if it failed (with
// the error shape's code, message and hint too); 202 otherwise.
type PipelineRun struct {
	Status int
	Body   struct {
		RunID   string             `json:"run_id"`
		JobID   string             `json:"job_id" doc:"The run's first job"`
		Status  events.RunStatus   `json:"status" enum:"running,succeeded,failed" doc:"running (202), succeeded (200) or failed (424)"`
		Error   string             `json:"error,omitempty" doc:"Why the run failed"`
		Results []events.RunResult `json:"results,omitempty" doc:"When it finished: the jobs that ended a path of the run, in the order they ended"`
		Code    errcode.Code       `json:"code,omitempty" enum:"run_failed" doc:"run_failed (424)"`
		Message string             `json:"message,omitempty" doc:"What failed (424)"`
		Hint    string             `json:"hint,omitempty" doc:"Where to look (424)"`
	}
}

func (s *Server) handleRunPipeline(ctx context.Context, in *RunPipelineInput) (*PipelineRun, error) {
	waiting := false // this caller holds a place among the synchronous ones
	defer func() {
		if waiting {
			<-s.syncSlots
		}
	}()
	started, err := s.opts.Engine().StartPipeline(ctx, engine.StartPipeline{Name: in.Name, Payload: in.RawBody,
		Trigger: events.TriggerAPI, By: events.ActorAPI, Now: s.opts.Now(), Allow: func(p *pipeline.Pipeline) error {
			if in.IdempotencyKey != "" {
				return newError(http.StatusBadRequest, "send the request without it; a pipeline run cannot be deduplicated yet",
					"Idempotency-Key is not supported for pipelines yet")
			}
			if p.ExecutionMode != pipeline.ModeSynchronous {
				return nil
			}
			select {
			case s.syncSlots <- struct{}{}:
				waiting = true
				return nil
			default:
				return s.tooManySync()
			}
		}})
	var withHeaders huma.HeadersError
	switch {
	case errors.As(err, &withHeaders):
		return nil, err // too_many_sync, with its Retry-After
	case err != nil:
		return nil, errorOf(err)
	}
	p := started.Pipeline
	out := &PipelineRun{Status: http.StatusAccepted}
	out.Body.RunID, out.Body.JobID, out.Body.Status = started.RunID, started.JobID, events.RunRunning
	if !waiting {
		return out, nil
	}
	wait := p.Timeout
	if wait <= 0 {
		wait = pipeline.DefaultTimeout
	}
	wait = min(wait, s.opts.Settings.MaxSyncTimeout)
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)() // Shutdown: answer now, the run goes on
	finished, err := views.WaitRun(waitCtx, s.opts.Ledger, started.RunID)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err() // the caller is gone: nobody reads the answer
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return out, nil
	default:
		return nil, errorOf(err)
	}
	out.Status = http.StatusOK
	out.Body.Status, out.Body.Error, out.Body.Results = finished.Status, finished.Error, finished.Results
	if finished.Status == events.RunFailed {
		b := &out.Body
		out.Status, b.Code = http.StatusFailedDependency, errcode.RunFailed
		b.Message = fmt.Sprintf("pipeline %s: run %s failed: %s", p.Name, b.RunID, b.Error)
		b.Hint = "see its jobs: GET /job/" + b.JobID + "/tree, or: ductile job inspect " + b.JobID
	}
	return out, nil
}

// tooManySync is the 503 of a synchronous call beyond
// api.max_concurrent_sync.
func (s *Server) tooManySync() error {
	n := s.opts.Settings.MaxConcurrentSync
	e := &Error{Status: http.StatusServiceUnavailable, Code: errcode.TooManySync,
		Message: fmt.Sprintf("%d synchronous pipeline calls are waiting already (api.max_concurrent_sync)", n),
		Hint: fmt.Sprintf("call again after Retry-After seconds (nothing was started); or raise api.max_concurrent_sync "+
			"(now %d) in the config and restart the daemon", n)}
	return huma.ErrorWithHeaders(e, http.Header{"Retry-After": {strconv.Itoa(syncRetryAfter)}})
}
