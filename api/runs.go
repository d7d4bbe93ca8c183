package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// The run resource (spec run-protocol.md §7): one /runs for plugin runs
// (a run is a job: run_id = job id, kind plugin) and pipeline runs (kind
// pipeline, their steps child runs). GET /run/{id}, the pipeline run of
// old, stays as a deprecated alias.

// runsDescription is what every /runs operation says about the resource.
const runsDescription = "One run resource: a plugin run is a job (run_id = the job id, kind plugin); " +
	"a pipeline run (POST /pipeline/{name}) is kind pipeline, its steps listed as child_run_ids (the plugin runs it enqueued). "

// registerRuns adds the run resource's operations.
func (s *Server) registerRuns() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "create-run", Method: http.MethodPost, Path: "/runs", Summary: "Create a plugin run",
		Description: runsDescription + "Queues a job running the plugin's entry (command) with args as its payload, as " +
			"POST /plugin/{plugin}/{command} does, and answers once it is durable: 202 with run_id and status queued. " +
			"With idempotency_key, a creation with the same key within the dedupe window (service.dedupe_ttl) answers the run the key " +
			"made (200, existing true, its status now) and queues nothing; with another plugin_id or entry_id it is refused: " +
			"409 code idempotency_conflict. mode sync waits for the run to end, up to api.max_sync_timeout: 200 with the run " +
			"(its RunRecord, whatever way it ended), or 202 past the wait (the run goes on; follow it with GET /runs/{id} or " +
			"GET /runs/stream?run_id=). At most api.max_concurrent_sync callers wait at once: one more is 503 too_many_sync, and nothing is queued. " +
			"Needs plugin:ro for an entry of type read, plugin:rw for any other.",
		DefaultStatus: http.StatusAccepted, MaxBodyBytes: s.opts.Settings.MaxBodySize + 1,
		Middlewares: huma.Middlewares{s.liftWriteDeadline},
		Errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge,
			http.StatusServiceUnavailable},
	}, auth.PluginRO), s.handleCreateRun)
	create := s.api.OpenAPI().Paths["/runs"].Post
	if body := s.api.OpenAPI().Components.Schemas.Map()["CreateRunInputBody"]; body != nil {
		body.Properties["args"].Type = huma.TypeObject // any JSON object, kept as it was sent
	}
	create.Metadata[writeScopeKey] = auth.PluginRW
	accepted := create.Responses["202"]
	accepted.Description = "The run is queued (or, with mode sync, still going past the wait)"
	create.Responses["200"] = &huma.Response{
		Description: "The idempotency key's run (existing true), or with mode sync the run ended within the wait (run set)",
		Content:     accepted.Content,
	}
	create.Responses["503"].Headers = map[string]*huma.Param{"Retry-After": {
		Description: "Seconds to wait before calling again (too_many_sync)", Schema: &huma.Schema{Type: huma.TypeInteger},
	}}

	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-runs", Method: http.MethodGet, Path: "/runs", Summary: "Runs, newest first: plugin runs, or pipeline runs",
		Description: runsDescription + "kind=plugin (the default) lists plugin runs, filtered by task_id, plugin_id and status, " +
			"a page at a time (next_cursor). kind=pipeline lists pipeline runs, filtered by pipeline and status (running, succeeded, failed), " +
			"newest first up to limit, without a cursor: what GET /runs listed before the run resource (pipeline= alone implies kind=pipeline). " +
			"A filter of the other kind is 400.",
		Errors: []int{http.StatusBadRequest},
	}, auth.JobsRO), s.handleListRuns)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-run", Method: http.MethodGet, Path: "/runs/{id}", Summary: "A run: a plugin run's RunRecord, or a pipeline run",
		Description: runsDescription + "The id may be a plugin run's or a pipeline run's, whole, its short id (the last 12 characters) " +
			"or a unique prefix; kind says which it is.",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleGetRun)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-pipeline-run", Method: http.MethodGet, Path: "/run/{id}",
		Summary:     "A pipeline run (deprecated: use GET /runs/{id})",
		Description: "The pipeline run of old, in its old shape. Deprecated: GET /runs/{id} answers for it (kind pipeline).",
		Deprecated:  true,
		Errors:      []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleGetPipelineRun)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "cancel-run", Method: http.MethodPost, Path: "/runs/{id}/cancel", Summary: "Cancel a plugin run",
		Description: "A queued run ends canceled at once; a running one shows cancel_requested (with cancel_requested_at and cancel_reason) " +
			"at once, its plugin gets SIGTERM, then SIGKILL after the grace period, and it ends canceled. 409 for a run that ended already.",
		MaxBodyBytes: s.opts.Settings.MaxBodySize + 1,
		Errors:       []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict},
	}, auth.JobsRW), s.handleCancelRun)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "retry-run", Method: http.MethodPost, Path: "/runs/{id}/retry", Summary: "Run a failed, timed out or canceled plugin run again, as a new run",
		Description: "The new run has a new run_id, parent_run_id the run retried, root_run_id the chain's first run and attempt one more. " +
			"A run is retried once (409 for one retried already: retry the newest), and only once it ended failed, timeout or canceled (409 otherwise).",
		DefaultStatus: http.StatusAccepted, MaxBodyBytes: s.opts.Settings.MaxBodySize + 1,
		Errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict},
	}, auth.JobsRW), s.handleRetryRun)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-run-exports", Method: http.MethodGet, Path: "/runs/{id}/export", Summary: "A plugin run's export items, oldest first",
		Description: "The run's export items as its plugin made them (every attempt's), a page at a time: pass next_after as after for the next page; " +
			"next_after is null on the last page. Items are durable before they are announced (GET /runs/{id}/export/stream), so a client " +
			"that lost the stream replays from here.",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleListRunExports)
}

// runID is a run's id in the path.
type runID struct {
	ID string `path:"id" minLength:"1" maxLength:"64" doc:"A run id, its short id (the last 12 characters), or a unique prefix of either"`
}

// CreateRunInput is POST /runs's request.
type CreateRunInput struct {
	Body struct {
		PluginID       string          `json:"plugin_id" minLength:"1" maxLength:"128" doc:"The plugin"`
		EntryID        string          `json:"entry_id" minLength:"1" maxLength:"128" doc:"The plugin's entry: one of its commands"`
		Args           json.RawMessage `json:"args,omitempty" doc:"The job's payload: a JSON object (absent: none)"`
		TaskID         string          `json:"task_id,omitempty" maxLength:"256" doc:"The caller's business id, to list its runs by (GET /runs?task_id=)"`
		TraceID        string          `json:"trace_id,omitempty" maxLength:"256" doc:"A cross-service trace id, handed to the plugin and recorded on its export items"`
		IdempotencyKey string          `json:"idempotency_key,omitempty" maxLength:"255" doc:"Within the dedupe window, a creation with this key answers the run it made"`
		Mode           string          `json:"mode,omitempty" enum:"async,sync" default:"async" doc:"sync: wait for the run to end (bounded by api.max_sync_timeout)"`
	}
}

// RunCreated is POST /runs's answer.
type RunCreated struct {
	Status int
	Body   struct {
		RunID    string           `json:"run_id"`
		Status   views.RunStatus  `json:"status" doc:"queued for a new run; the run's status now for an existing one or after a sync wait"`
		Existing bool             `json:"existing" doc:"The idempotency key named a run made before: nothing was queued"`
		Run      *views.RunRecord `json:"run,omitempty" doc:"mode sync: the run, once it ended within the wait"`
	}
}

func (s *Server) handleCreateRun(ctx context.Context, in *CreateRunInput) (*RunCreated, error) {
	b := in.Body
	waiting := false // this caller holds a place among the synchronous ones
	defer func() {
		if waiting {
			<-s.syncSlots
		}
	}()
	res, err := s.opts.Engine().Enqueue(ctx, engine.Enqueue{Plugin: b.PluginID, Command: b.EntryID, Payload: b.Args,
		TaskID: b.TaskID, TraceID: b.TraceID, IdempotencyKey: b.IdempotencyKey,
		By: events.ActorAPI, Now: s.opts.Now(), Allow: func(c events.AppliedCommand) error {
			if c.Type != "read" {
				if err := s.require(ctx, auth.PluginRW); err != nil {
					return err
				}
			}
			if b.Mode != "sync" {
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
	out := &RunCreated{Status: http.StatusAccepted}
	out.Body.RunID, out.Body.Status, out.Body.Existing = res.JobID, views.RunQueued, res.Existing
	if res.Existing {
		out.Status = http.StatusOK
		rec, err := views.ReadRunRecord(ctx, s.opts.Ledger, res.JobID)
		if err != nil {
			return nil, errorOf(err)
		}
		out.Body.Status = rec.Status
	}
	if !waiting {
		return out, nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, s.opts.Settings.MaxSyncTimeout)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)() // Shutdown: answer now, the run goes on
	_, _, err = views.WaitJob(waitCtx, s.opts.Ledger, res.JobID)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err() // the caller is gone: nobody reads the answer
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		out.Status = http.StatusAccepted
		if rec, err := views.ReadRunRecord(ctx, s.opts.Ledger, res.JobID); err == nil {
			out.Body.Status = rec.Status
		}
		return out, nil
	default:
		return nil, errorOf(err)
	}
	rec, err := views.ReadRunRecord(ctx, s.opts.Ledger, res.JobID)
	if err != nil {
		return nil, errorOf(err)
	}
	out.Status = http.StatusOK
	out.Body.Status, out.Body.Run = rec.Status, &rec
	return out, nil
}

// ListRunsInput is GET /runs's query.
type ListRunsInput struct {
	Kind     string `query:"kind" enum:"plugin,pipeline" doc:"Which runs: plugin (the default) or pipeline"`
	TaskID   string `query:"task_id" maxLength:"256" doc:"kind plugin: only the runs of this task"`
	PluginID string `query:"plugin_id" maxLength:"128" doc:"kind plugin: only this plugin's runs"`
	Pipeline string `query:"pipeline" maxLength:"128" doc:"kind pipeline: only this pipeline's runs (alone, it implies kind=pipeline)"`
	Status   string `query:"status" enum:"queued,running,cancel_requested,succeeded,failed,timeout,canceled" doc:"Only runs with this status (kind pipeline: running, succeeded or failed)"`
	Limit    int    `query:"limit" minimum:"1" maximum:"1000" default:"50" doc:"The most runs a page holds (kind plugin: 500 at most, a larger limit is 500)"`
	Cursor   string `query:"cursor" maxLength:"512" doc:"kind plugin: where to go on, the next_cursor of the previous page (with the same filters)"`
}

// RunList is GET /runs's answer.
type RunList struct {
	Body struct {
		Kind       string        `json:"kind" enum:"plugin,pipeline" doc:"The kind of the runs listed"`
		Runs       []RunResource `json:"runs"`
		NextCursor string        `json:"next_cursor,omitempty" doc:"kind plugin: pass it as cursor for the next page; absent on the last page"`
	}
}

func (s *Server) handleListRuns(ctx context.Context, in *ListRunsInput) (*RunList, error) {
	kind := in.Kind
	if kind == "" && in.Pipeline != "" {
		kind = RunKindPipeline
	}
	if kind == "" {
		kind = RunKindPlugin
	}
	out := &RunList{}
	out.Body.Kind, out.Body.Runs = kind, []RunResource{}
	if kind == RunKindPipeline {
		if in.TaskID != "" || in.PluginID != "" || in.Cursor != "" {
			return nil, newError(http.StatusBadRequest, "pipeline runs are filtered by pipeline and status, and listed up to limit; leave task_id, plugin_id and cursor out",
				"task_id, plugin_id and cursor are filters of kind plugin")
		}
		status := events.RunStatus(in.Status)
		if status != "" && !slices.Contains(events.RunStatuses(), status) {
			return nil, newError(http.StatusBadRequest, "give running, succeeded or failed", "status "+strconv.Quote(in.Status)+" is not a pipeline run's")
		}
		runs, err := views.FindRuns(ctx, s.opts.Ledger, views.RunQuery{Pipeline: in.Pipeline, Status: status, Limit: in.Limit})
		if err != nil {
			return nil, errorOf(err)
		}
		for _, r := range runs {
			out.Body.Runs = append(out.Body.Runs, RunResource{Pipeline: PipelineRecord(r)})
		}
		return out, nil
	}
	if in.Pipeline != "" {
		return nil, newError(http.StatusBadRequest, "list pipeline runs with kind=pipeline", "pipeline is a filter of kind pipeline")
	}
	page, err := views.ListRuns(ctx, s.opts.Ledger, views.RunFilter{TaskID: in.TaskID, PluginID: in.PluginID,
		Status: views.RunStatus(in.Status), After: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, errorOf(err)
	}
	for i := range page.Runs {
		out.Body.Runs = append(out.Body.Runs, RunResource{Plugin: &page.Runs[i]})
	}
	out.Body.NextCursor = page.Next
	return out, nil
}

// Run is GET /runs/{id}'s answer.
type Run struct {
	Body RunResource
}

func (s *Server) handleGetRun(ctx context.Context, in *runID) (*Run, error) {
	res, err := s.readRun(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return &Run{Body: res}, nil
}

// readRun reads the run id names: a plugin run (a job) if one has it, else
// a pipeline run.
func (s *Server) readRun(ctx context.Context, id string) (RunResource, error) {
	jobID, err := views.ResolveJobID(ctx, s.opts.Ledger, id)
	if err == nil {
		rec, err := views.ReadRunRecord(ctx, s.opts.Ledger, jobID)
		if err != nil {
			return RunResource{}, errorOf(err)
		}
		return RunResource{Plugin: &rec}, nil
	}
	if !errors.Is(err, views.ErrJobNotFound) {
		return RunResource{}, errorOf(err)
	}
	runID, err := views.ResolveRunID(ctx, s.opts.Ledger, id)
	var run views.Run
	if err == nil {
		run, err = views.ReadRun(ctx, s.opts.Ledger, runID)
	}
	switch {
	case errors.Is(err, views.ErrRunNotFound):
		return RunResource{}, newError(http.StatusNotFound, "see: GET /runs (plugin runs) or GET /runs?kind=pipeline", "no run "+id)
	case err != nil:
		return RunResource{}, errorOf(err)
	}
	return RunResource{Pipeline: PipelineRecord(run)}, nil
}

// PipelineRunStatus is GET /run/{id}'s answer (deprecated).
type PipelineRunStatus struct {
	Body views.Run
}

func (s *Server) handleGetPipelineRun(ctx context.Context, in *runID) (*PipelineRunStatus, error) {
	id, err := views.ResolveRunID(ctx, s.opts.Ledger, in.ID)
	var run views.Run
	if err == nil {
		run, err = views.ReadRun(ctx, s.opts.Ledger, id)
	}
	if errors.Is(err, views.ErrRunNotFound) {
		return nil, newError(http.StatusNotFound, "see: GET /runs?kind=pipeline", err.Error())
	}
	if err != nil {
		return nil, errorOf(err)
	}
	return &PipelineRunStatus{Body: run}, nil
}

// CancelRunInput is POST /runs/{id}/cancel's request.
type CancelRunInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"A run id, its short id, or a unique prefix of either"`
	Body *struct {
		Reason string `json:"reason,omitempty" maxLength:"1024" doc:"Why: the run's cancel_reason"`
	} `required:"false"`
}

// RunCanceled is the answer to a cancel.
type RunCanceled struct {
	Body struct {
		RunID  string          `json:"run_id"`
		Status views.RunStatus `json:"status" doc:"canceled, or cancel_requested for a running run"`
	}
}

func (s *Server) handleCancelRun(ctx context.Context, in *CancelRunInput) (*RunCanceled, error) {
	reason := "canceled through the API"
	if in.Body != nil && in.Body.Reason != "" {
		reason = in.Body.Reason
	}
	res, err := s.opts.Engine().Cancel(ctx, engine.Cancel{Job: in.ID, Reason: reason, By: events.ActorAPI, Now: s.opts.Now()})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &RunCanceled{}
	out.Body.RunID, out.Body.Status = res.JobID, views.RunStatus(res.Status)
	return out, nil
}

// RunRetried is the answer to a retry.
type RunRetried struct {
	Body struct {
		RunID       string          `json:"run_id" doc:"The new run"`
		Status      views.RunStatus `json:"status" doc:"queued"`
		ParentRunID string          `json:"parent_run_id" doc:"The run retried"`
	}
}

func (s *Server) handleRetryRun(ctx context.Context, in *runID) (*RunRetried, error) {
	res, err := s.opts.Engine().Retry(ctx, engine.Redo{Job: in.ID, By: events.ActorAPI, Now: s.opts.Now()})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &RunRetried{}
	out.Body.RunID, out.Body.Status, out.Body.ParentRunID = res.JobID, views.RunQueued, res.RetryOf
	if res.Deduped && res.ExistingJobID != "" {
		out.Body.RunID = res.ExistingJobID
	}
	return out, nil
}

// RunExportsInput is GET /runs/{id}/export's request.
type RunExportsInput struct {
	ID    string `path:"id" minLength:"1" maxLength:"64" doc:"A run id, its short id, or a unique prefix of either"`
	After string `query:"after" maxLength:"128" doc:"The next_after of the previous page (an export_item_id): the items after it"`
	Limit int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"The most items to return"`
}

// RunExports is a page of a run's export items.
type RunExports struct {
	Body struct {
		Items     []views.ExportItem `json:"items"`
		NextAfter *string            `json:"next_after" doc:"Pass it as after for the next page; null on the last page"`
	}
}

func (s *Server) handleListRunExports(ctx context.Context, in *RunExportsInput) (*RunExports, error) {
	id, err := views.ResolveJobID(ctx, s.opts.Ledger, in.ID)
	if err != nil {
		return nil, errorOf(err)
	}
	items, next, err := views.RunExports(ctx, s.opts.Ledger, id, in.After, in.Limit)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &RunExports{}
	out.Body.Items = items
	if out.Body.Items == nil {
		out.Body.Items = []views.ExportItem{}
	}
	if next != "" {
		out.Body.NextAfter = &next
	}
	return out, nil
}
